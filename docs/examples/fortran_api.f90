! fortran_api: numaaff from Fortran, through module numaaff (ISO_C_BINDING over numaaff.h).
! A two-dimensional array comes from the heap by kind as an array pointer (here on the calling
! thread's node), is moved whole to the last node with numaaff_move_to, and its pages are
! counted per node; the capability report comes back as a Fortran string, and a caller's
! mistake (an unknown node) as an errno value with a null pointer. Link numaaff::fortran in
! CMake, or `pkg-config --cflags --libs numaaff-fortran`.
! Asserted on any machine: the move counts every page of the array once (on one node: all
! already there) and keeps the data, no page is left unpopulated, the report says whether
! placement is effective, and the unknown node gives EINVAL and no array.
! Prints "fortran_api: ok" at the end.
program fortran_api
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: error_unit
  use numaaff
  implicit none
  integer, parameter :: n = 512, m = 256  ! 1 MiB of doubles
  real(c_double), pointer :: a(:, :)
  integer(c_int), pointer :: missing(:)
  type(numaaff_move_result) :: r
  integer(c_int) :: nodes(64), ierr, err
  integer(c_size_t) :: count, bytes, page, here, unpopulated, pages
  integer(c_intptr_t) :: first
  integer :: i, j, at
  character(len=:), allocatable :: report

  ! [allocate]
  ierr = numaaff_nodes(nodes, 64_c_size_t, count)
  call numaaff_kind_allocate(numaaff_kind_local, a, [n, m], err)
  if (err /= 0) then
    write (error_unit, '(2a)') 'numaaff_kind_allocate: ', numaaff_strerror(err)
    error stop 1
  end if
  do j = 1, m
    do i = 1, n
      a(i, j) = real(i + n * (j - 1), c_double)
    end do
  end do
  ! [allocate]
  call require(ierr == 0 .and. count >= 1, 'numaaff_nodes lists the nodes')

  ! [move]
  ! The whole array to the last node, then its pages there and the pages nobody wrote.
  bytes = size(a, kind=c_size_t) * c_sizeof(a(1, 1))
  ierr = numaaff_move_to(c_loc(a(1, 1)), bytes, nodes(count), r)
  call require(ierr == 0, 'numaaff_move_to')
  print '(a, i0, a, i0, a, i0, a, i0, a)', 'move_to node ', nodes(count), ': ', r%moved, ' moved, ', &
    r%already_there, ' already there, ', r%failed, ' failed'
  ierr = numaaff_pages_on(c_loc(a(1, 1)), bytes, nodes(count), here)
  ierr = ierr + numaaff_pages_unpopulated(c_loc(a(1, 1)), bytes, unpopulated)
  ! [move]
  call require(ierr == 0, 'the page counts')
  page = numaaff_page_bytes()
  first = transfer(c_loc(a(1, 1)), first)
  pages = int((first + int(bytes, c_intptr_t) + int(page, c_intptr_t) - 1) / int(page, c_intptr_t) - &
              first / int(page, c_intptr_t), c_size_t)
  call require(r%total == pages, 'the move covers every page of the array')
  call require(r%moved + r%already_there + r%unpopulated + r%failed == r%total, 'the move counts every page once')
  if (count == 1) call require(r%already_there == r%total .and. here == pages, 'one node: every page is on it')
  call require(unpopulated == 0, 'every page was written')
  do j = 1, m
    do i = 1, n
      call require(abs(a(i, j) - real(i + n * (j - 1), c_double)) <= 0.0_c_double, 'the move keeps the data')
    end do
  end do

  ! [report]
  ! The capability report as a Fortran string; its last line says whether placement acts here.
  report = numaaff_system_report()
  at = index(report, 'placement effective: ')
  call require(at > 0, 'the report says whether placement is effective')
  print '(a)', trim(report(at:len(report) - 1))
  ! [report]

  ! [errors]
  ! A caller's mistake is an errno value and a null pointer, never a crash.
  call numaaff_kind_allocate(numaaff_kind_onnode(100000_c_int), missing, [16], err)
  print '(3a)', 'an array on node 100000: ', numaaff_strerror(err), ' (EINVAL)'
  ! [errors]
  call require(err == 22 .and. .not. associated(missing), 'an unknown node is EINVAL and no array')

  call numaaff_kind_deallocate(a)
  call require(.not. associated(a), 'numaaff_kind_deallocate frees the array and nullifies the pointer')
  print '(a)', 'fortran_api: ok'

contains

  ! Every check is something numaaff promises; a broken promise stops the program with status 1.
  subroutine require(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      write (error_unit, '(2a)') 'fortran_api: FAILED: ', what
      error stop 1
    end if
  end subroutine require

end program fortran_api
