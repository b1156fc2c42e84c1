! The Fortran module against the C library: every binding is called once with arguments a
! Fortran program would pass, and its result checked (a wrong interface shows here as a wrong
! value or a crash, not as a compile error). Exit status 1 on the first failure.
program test_fortran_api
  use, intrinsic :: iso_c_binding
  use numaaff
  implicit none
  integer(c_int) :: nodes(1024), cpus(4096), owners(64), ierr, first, d
  integer(c_size_t) :: count, ncpus, bytes, page, on, i
  type(c_ptr) :: p
  type(numaaff_move_result) :: r
  type(numaaff_next_touch_stats) :: st
  character(len=:), allocatable :: text
  integer(c_signed_char), pointer :: b(:)

  call check(numaaff_node_count() >= 1, 'node_count')
  ierr = numaaff_nodes(nodes, 1024_c_size_t, count)
  call check(ierr == 0 .and. count == numaaff_node_count(), 'nodes')
  first = nodes(1)
  ierr = numaaff_cpus_of(first, cpus, 4096_c_size_t, ncpus)
  call check(ierr == 0 .and. ncpus >= 1 .and. all(cpus(1:ncpus) >= 0), 'cpus_of')
  ierr = numaaff_distance(first, first, d)
  call check(ierr == 0 .and. d == 10, 'distance')
  call check(numaaff_cpus_of(4000_c_int, cpus, 4096_c_size_t, ncpus) /= 0, 'cpus_of rejects a bad node')

  text = numaaff_system_report()
  call check(index(text, 'node') > 0, 'system_report')
  text = numaaff_strerror(22_c_int)
  call check(len(text) > 0, 'strerror')

  page = numaaff_page_bytes()
  call check(page >= 4096 .and. iand(page, page - 1) == 0, 'page_bytes')
  bytes = 64 * page
  p = numaaff_alloc_onnode(bytes, first)
  call check(c_associated(p), 'alloc_onnode')
  call c_f_pointer(p, b, [bytes])
  b = 7
  ierr = numaaff_move_to(p, bytes, first, r)
  call check(ierr == 0 .and. r%total == 64 .and. r%failed == 0 .and. r%carried == 0 .and. &
             r%moved + r%already_there + r%unpopulated == 64, 'move_to')
  ierr = numaaff_pages_on(p, bytes, first, on)
  call check(ierr == 0 .and. on <= 64, 'pages_on')

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
             st%pages_moved + st%pages_failed + st%pages_unpopulated == 64 .and. st%chunks_released == 0 .and. &
             st%handler_ns > 0, 'get_next_touch_stats')
  call check(numaaff_place_blocks_on_next_touch(p, bytes, 3 * page, owners, 2_c_size_t) == 22, 'too few owners')
  call numaaff_free(p, bytes)
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
