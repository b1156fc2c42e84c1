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
  type(numaaff_node_counters) :: rows(1024)
  type(numaaff_process_counters) :: pc
  integer(c_long_long) :: cells(64 * 64), heap(numaaff_heap_kinds * 1024)
  integer(c_size_t) :: side
  character(len=:), allocatable :: text
  integer(c_signed_char), pointer :: b(:)
  type(numaaff_kind) :: k
  real(c_double), pointer :: x(:, :), d2(:, :), flat(:)
  integer(c_int), pointer :: i1(:)
  complex(c_double_complex), pointer :: z3(:, :, :)
  real(c_float), pointer :: f1(:)
  integer(c_int64_t), pointer :: l2(:, :)
  integer(c_int), target :: spare_int(10)
  real(c_double), target :: spare_double(2, 2)
  integer :: ii, jj

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
  ierr = numaaff_snapshot(0_c_long_long, rows, 1024_c_size_t, on)
  call check(ierr == 0 .and. on >= count .and. any(rows(1:on)%node == first) .and. &
             sum(rows(1:on)%next_touch_chunks) >= 1 .and. sum(rows(1:on)%next_touch_faults) >= 1, 'snapshot')
  ierr = numaaff_snapshot_process(0_c_long_long, pc)
  call check(ierr == 0 .and. pc%pools == 0 .and. pc%workers == 0, 'snapshot_process')
  ierr = numaaff_snapshot_steals(0_c_long_long, cells, size(cells, kind=c_size_t), side)
  call check(ierr == 0 .and. (side == on .or. (side == 0 .and. on > 64)), 'snapshot_steals')
  ierr = numaaff_snapshot_heap(0_c_long_long, heap, size(heap, kind=c_size_t), side)
  call check(ierr == 0 .and. side == on, 'snapshot_heap')
  do i = 1, on  ! each node's kinds add up to its bound and preferred bytes (nothing allocated since)
    call check(sum(heap((i - 1) * numaaff_heap_kinds + 1:i * numaaff_heap_kinds)) == &
               rows(i)%heap_bound_bytes + rows(i)%heap_preferred_bytes, 'snapshot_heap by kind')
  end do
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

  ! numaaff_kind_allocate / _deallocate: array pointers of a given shape on the heap by kind.
  call numaaff_kind_allocate(numaaff_kind_local, d2, [300, 7], ierr)
  call check(ierr == 0 .and. associated(d2), 'kind_allocate double rank 2')
  call check(all(shape(d2) == [300, 7]) .and. size(d2) == 2100 .and. all(lbound(d2) == 1), &
             'kind_allocate shape')
  do jj = 1, 7
    do ii = 1, 300
      d2(ii, jj) = ii + 1000 * jj
    end do
  end do
  call c_f_pointer(c_loc(d2), flat, [2100])  ! column-major: d2(i, j) is element i + 300 * (j - 1)
  call check(all(flat == [((real(ii + 1000 * jj, c_double), ii = 1, 300), jj = 1, 7)]), 'kind_allocate values')
  call check(numaaff_kind_usable_size(c_loc(d2)) >= 300 * 7 * 8, 'kind_allocate usable_size')
  p = c_loc(d2)
  call numaaff_kind_deallocate(d2)
  call check(.not. associated(d2), 'kind_deallocate nullifies')
  ! The thread's cache hands a freed block back first: the block was freed, not dropped.
  call numaaff_kind_allocate(numaaff_kind_local, d2, [300, 7], ierr)
  call check(ierr == 0 .and. c_associated(c_loc(d2), p), 'kind_deallocate frees the block')
  call numaaff_kind_deallocate(d2)
  call numaaff_kind_deallocate(d2)  ! a null pointer: no-op
  call check(.not. associated(d2), 'kind_deallocate of null')
  call numaaff_kind_allocate(numaaff_kind_interleave, i1, [1000], ierr)
  call check(ierr == 0 .and. size(i1) == 1000 .and. numaaff_kind_usable_size(c_loc(i1)) >= 4000, &
             'kind_allocate int rank 1')
  i1 = [(ii, ii = 1, 1000)]
  call check(sum(i1) == 500500, 'kind_allocate int values')
  call numaaff_kind_deallocate(i1)
  call numaaff_kind_allocate(numaaff_kind_onnode(first), z3, [4, 5, 6], ierr)
  call check(ierr == 0 .and. all(shape(z3) == [4, 5, 6]) .and. &
             numaaff_kind_usable_size(c_loc(z3)) >= 4 * 5 * 6 * 16, 'kind_allocate complex rank 3')
  z3 = (1.0_c_double, -2.0_c_double)
  z3(4, 5, 6) = (3.0_c_double, 4.0_c_double)
  call check(z3(1, 1, 1) == (1.0_c_double, -2.0_c_double) .and. z3(4, 5, 6) == (3.0_c_double, 4.0_c_double), &
             'kind_allocate complex values')
  call numaaff_kind_deallocate(z3)
  call check(.not. associated(z3), 'kind_deallocate complex')
  call numaaff_kind_allocate(numaaff_kind_local, f1, [10])  ! no err
  call numaaff_kind_allocate(numaaff_kind_capacity, l2, [3, 2], ierr)
  call check(associated(f1) .and. size(f1) == 10 .and. ierr == 0 .and. all(shape(l2) == [3, 2]), &
             'kind_allocate float and int64')
  call numaaff_kind_deallocate(f1)
  call numaaff_kind_deallocate(l2)
  call numaaff_kind_allocate(numaaff_kind_local, d2, [0, 7], ierr)
  call check(ierr == 0 .and. associated(d2) .and. size(d2) == 0 .and. all(shape(d2) == [0, 7]), &
             'kind_allocate zero size')
  call numaaff_kind_deallocate(d2)
  call check(.not. associated(d2), 'kind_deallocate zero size')
  d2 => spare_double  ! a failure leaves the pointer null(), whatever it pointed at before
  call numaaff_kind_allocate(numaaff_kind_onnode(100000_c_int), d2, [300, 7], ierr)
  call check(ierr == 22 .and. .not. associated(d2), 'kind_allocate bad node')
  call numaaff_kind_allocate(numaaff_kind_onnode(100000_c_int), d2, [0, 7], ierr)
  call check(ierr == 22 .and. .not. associated(d2), 'kind_allocate bad node, zero size')
  i1 => spare_int
  call numaaff_kind_allocate(numaaff_kind_onnode(100000_c_int), i1, [10])
  call check(.not. associated(i1), 'kind_allocate bad node without err')
  call numaaff_kind_allocate(numaaff_kind_local, d2, [300, -1], ierr)
  call check(ierr == 22 .and. .not. associated(d2), 'kind_allocate negative extent')
  call numaaff_kind_allocate(numaaff_kind_local, d2, [huge(0), huge(0)], ierr)  ! 8 * (2**31 - 1)**2 bytes
  call check(ierr == 12 .and. .not. associated(d2), 'kind_allocate size overflow')
  call numaaff_kind_allocate(numaaff_kind_local, z3, [2**20, 2**20, 2**20], ierr)  ! 2**64 bytes: 0 once wrapped
  call check(ierr == 12 .and. .not. associated(z3), 'kind_allocate size overflow, rank 3')
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
