! A Fortran solver's phase change with numaaff: an array placed on the first node, then
! re-owned by an OpenMP team (thread t owns block t); next touch moves each block to its
! owner's node. Placement is checked with a raw move_pages query (libnuma), page by page.
!
! usage: phase_change_f [MiB]   (exit status 0 if the data survived, 1 otherwise, 2 for a bad
! argument; prints the fraction of pages on their owner's node)
program phase_change_f
  use, intrinsic :: iso_c_binding
  use omp_lib
  use numaaff
  implicit none
  interface
    integer(c_long) function move_pages(pid, count, pages, nodes, status, flags) bind(C, name="move_pages")
      import :: c_int, c_long, c_ptr
      integer(c_int), value :: pid
      integer(c_long), value :: count
      type(c_ptr), intent(in) :: pages(*)
      type(c_ptr), value :: nodes
      integer(c_int), intent(out) :: status(*)
      integer(c_int), value :: flags
    end function
  end interface

  integer(c_size_t) :: bytes, n, i, per_thread, pages, p, t, page
  integer :: mib, team, ierr, me, placed
  character(len=32) :: arg
  real(c_double), pointer :: a(:)
  type(c_ptr) :: base
  type(c_ptr), allocatable :: addr(:)
  integer(c_int), allocatable :: status(:), owner(:)
  real(c_double) :: total, expect

  mib = 16
  if (command_argument_count() > 1) stop 2
  if (command_argument_count() == 1) then
    call get_command_argument(1, arg)
    read (arg, *, iostat=ierr) mib
    if (ierr /= 0 .or. mib <= 0) then
      write (0, '(a)') 'usage: phase_change_f [MiB]'
      stop 2
    end if
  end if
  bytes = int(mib, c_size_t) * 1048576_c_size_t
  n = bytes / 8_c_size_t

  base = numaaff_alloc_onnode(bytes, 0_c_int)
  if (.not. c_associated(base)) stop 1
  call c_f_pointer(base, a, [n])
  do i = 1, n
    a(i) = real(i, c_double)
  end do

  team = omp_get_max_threads()
  allocate (owner(team))
  per_thread = (n + int(team, c_size_t) - 1) / int(team, c_size_t)
  ierr = numaaff_next_touch_blocks(base, bytes, per_thread * 8_c_size_t)
  if (ierr /= 0) stop 1
  total = 0
  !$omp parallel num_threads(team) private(me, ierr) reduction(+:total)
  me = omp_get_thread_num()
  ierr = numaaff_pin_thread(numaaff_team_node(int(me, c_int), int(team, c_int)))
  owner(me + 1) = numaaff_current_node()
  !$omp do schedule(static, per_thread)
  do i = 1, n
    a(i) = a(i) + 1
    total = total + a(i)
  end do
  !$omp end do
  !$omp end parallel
  ierr = numaaff_disarm(base, bytes)

  page = numaaff_page_bytes()
  pages = bytes / page
  allocate (addr(pages), status(pages))
  do p = 1, pages
    addr(p) = transfer(transfer(base, 0_c_intptr_t) + int((p - 1) * page, c_intptr_t), base)
  end do
  placed = 0
  if (move_pages(0_c_int, int(pages, c_long), addr, c_null_ptr, status, 0_c_int) == 0) then
    do p = 1, pages
      t = min(((p - 1) * page / 8_c_size_t) / per_thread + 1, int(team, c_size_t))
      if (status(p) == owner(t)) placed = placed + 1
    end do
  end if
  expect = real(n, c_double) * (real(n, c_double) + 1) / 2 + real(n, c_double)
  write (*, '(a,i0,a,i0,a,f6.3,a,l1)') 'phase change (Fortran): ', mib, ' MiB, ', team, &
    ' threads: ', real(placed) / real(pages), ' of the pages on their owner''s node (raw move_pages); data intact: ', &
    total == expect
  call numaaff_free(base, bytes)
  if (total /= expect) stop 1
end program phase_change_f
