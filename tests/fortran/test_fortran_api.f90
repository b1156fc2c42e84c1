! The Fortran module against the C library: every binding is called once with arguments a
! Fortran program would pass, and its result checked (a wrong interface shows here as a wrong
! value or a crash, not as a compile error). Exit status 1 on the first failure.
program test_fortran_api
  use, intrinsic :: iso_c_binding
  use numaaff
  implicit none
  integer(c_int) :: nodes(1024), cpu_nodes(1024), wnodes(1024), weights(1024), cpus(4096), owners(64)
  integer(c_int) :: ierr, first, d
  integer(c_size_t) :: count, ncpu_nodes, wcount, ncpus, bytes, page, on, i
  type(c_ptr) :: p
  type(numaaff_move_result) :: r
  type(numaaff_next_touch_stats) :: st
  character(len=:), allocatable :: text
  integer(c_signed_char), pointer :: b(:)
  type(numaaff_kind) :: k
  real(c_double), pointer :: x(:, :)

  call check(numaaff_node_count() >= 1, 'node_count')
  ierr = numaaff_nodes(nodes, 1024_c_size_t, count)
  call check(ierr == 0 .and. count == numaaff_node_count(), 'nodes')
  first = nodes(1)
  ierr = numaaff_cpu_nodes(cpu_nodes, 1024_c_size_t, ncpu_nodes)
  call check(ierr == 0 .and. ncpu_nodes >= 1 .and. ncpu_nodes <= count .and. cpu_nodes(1) >= 0, 'cpu_nodes')
  ierr = numaaff_cpus_of(first, cpus, 4096_c_size_t, ncpus)
  call check(ierr == 0 .and. ncpus >= 1 .and. all(cpus(1:ncpus) >= 0), 'cpus_of')
  ierr = numaaff_distance(first, first, d)
  call check(ierr == 0 .and. d == 10, 'distance')
  call check(numaaff_cpus_of(4000_c_int, cpus, 4096_c_size_t, ncpus) /= 0, 'cpus_of rejects a bad node')
  ! schedule(static) of 10 iterations over 3 threads: 0-3, 4-6, 7-9 (0-based indices)
  call check(numaaff_static_thread(3_c_size_t, 10_c_size_t, 3_c_int) == 0 .and. &
             numaaff_static_thread(4_c_size_t, 10_c_size_t, 3_c_int) == 1 .and. &
             numaaff_static_thread(9_c_size_t, 10_c_size_t, 3_c_int) == 2 .and. &
             numaaff_static_thread(10_c_size_t, 10_c_size_t, 3_c_int) == -1, 'static_thread')
  call check(numaaff_static_node(9_c_size_t, 10_c_size_t, 3_c_int) == numaaff_team_node(2_c_int, 3_c_int), &
             'static_node')

  text = numaaff_system_report()
  call check(index(text, 'node') > 0, 'system_report')
  text = numaaff_strerror(22_c_int)
  call check(len(text) > 0, 'strerror')

  page = numaaff_page_bytes()
  call check(page >= 4096 .and. iand(page, page - 1) == 0, 'page_bytes')
  bytes = 64 * page
  p = numaaff_alloc_onnode_huge(bytes, first, numaaff_huge_never)
  call check(c_associated(p), 'alloc_onnode_huge')
  call numaaff_free(p, bytes)
  p = numaaff_alloc_local_huge(bytes, numaaff_huge_always)
  call check(c_associated(p), 'alloc_local_huge')
  call numaaff_free(p, bytes)
  call check(.not. c_associated(numaaff_alloc_local_huge(bytes, 9_c_int)), 'alloc_local_huge rejects a bad choice')
  p = numaaff_alloc_onnode(bytes, first)
  call check(c_associated(p), 'alloc_onnode')
  call c_f_pointer(p, b, [bytes])
  b = 7
  ierr = numaaff_move_to(p, bytes, first, r)
  call check(ierr == 0 .and. r%total == 64 .and. r%failed == 0 .and. r%carried == 0 .and. &
             r%moved + r%already_there + r%unpopulated == 64, 'move_to')
  ierr = numaaff_pages_on(p, bytes, first, on)
  call check(ierr == 0 .and. on <= 64, 'pages_on')

  ierr = numaaff_bandwidth_weights(wnodes, weights, 1024_c_size_t, wcount)
  call check(ierr == 0 .and. wcount == count .and. any(weights(1:wcount) >= 1) .and. &
             (count > 1 .or. weights(1) == 1), 'bandwidth_weights')
  ierr = numaaff_weighted_interleave(p, bytes, wnodes, weights, wcount)
  call check(ierr == 0 .and. all(b == 7), 'weighted_interleave')
  call check(numaaff_weighted_interleave(p, bytes, wnodes, weights, 0_c_size_t) == 22, &
             'weighted_interleave of no nodes')
  ierr = numaaff_promote(p, bytes, r)
  call check(ierr == 0 .and. r%total == 64 .and. r%failed == 0, 'promote')
  ierr = numaaff_demote(p, bytes, r)
  call check(ierr == 0 .and. r%total == 64 .and. r%failed == 0 .and. all(b == 7), 'demote')
  owners = numaaff_keep
  owners(1) = first
  ierr = numaaff_place_blocks(p, bytes, page, owners, 64_c_size_t, r)
  call check(ierr == 0 .and. r%total == 64 .and. r%failed == 0 .and. r%moved <= 1 .and. &
             r%moved + r%already_there == 64, 'place_blocks with numaaff_keep')

  owners = first
  call check(numaaff_reset_next_touch_stats() == 0, 'reset_next_touch_stats')
  call check(numaaff_place_blocks_on_next_touch(p, bytes, 3 * page, owners, 64_c_size_t) == 0, &
             'place_blocks_on_next_touch')
  do i = 1, bytes, page
    b(i) = b(i) + 1_c_signed_char
  end do
  call check(all(b(1:bytes:page) == 8) .and. all(b(2:page) == 7), 'data kept through next touch')
  ierr = numaaff_get_next_touch_stats(st)
  call check(ierr == 0 .and. st%faults >= 1 .and. st%chunks_migrated >= 1 .and. &
             st%pages_moved + st%pages_already_there + st%pages_failed + st%pages_unpopulated == 64 .and. &
             st%chunks_released == 0 .and. &
             st%handler_ns > 0, 'get_next_touch_stats')
  call check(numaaff_place_blocks_on_next_touch(p, bytes, 3 * page, owners, 2_c_size_t) == 22, 'too few owners')
  call numaaff_free(p, bytes)

  ! The heap by kind: constant kinds, a kind with options, size-less free, realloc.
  p = numaaff_kind_malloc(numaaff_kind_local, 8_c_size_t * 100 * 50)
  call check(c_associated(p), 'kind_malloc local')
  call c_f_pointer(p, x, [100, 50])
  x = 1.5_c_double
  call check(numaaff_kind_usable_size(p) >= 8 * 100 * 50, 'kind_usable_size')
  p = numaaff_kind_realloc(numaaff_kind_interleave, p, 8_c_size_t * 100 * 100)
  call c_f_pointer(p, x, [100, 100])
  call check(c_associated(p) .and. all(x(:, 1:50) == 1.5_c_double), 'kind_realloc keeps the contents')
  call numaaff_kind_free(p)
  call check(numaaff_kind_with(numaaff_kind_fastest, numaaff_kind_preferred, k) == 0 .and. &
             numaaff_kind_equal(k, numaaff_kind_fastest) == 0, 'kind_with')
  p = numaaff_kind_calloc(k, 10_c_size_t, 8_c_size_t)
  call check(c_associated(p), 'kind_calloc')
  call numaaff_kind_free(p)
  call check(.not. c_associated(numaaff_kind_malloc(numaaff_kind_onnode(100000_c_int), 8_c_size_t)), 'kind_onnode bad node')
  call check(numaaff_kind_posix_memalign(numaaff_kind_capacity, p, 4096_c_size_t, 100_c_size_t) == 0 .and. &
             c_associated(p), 'kind_posix_memalign')
  call numaaff_kind_free(p)
  write (*, '(a)') 'Fortran API: all checks passed'

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      write (0, '(2a)') 'FAILED: ', what
      error stop 1
    end if
  end subroutine
end program test_fortran_api
