! numaaff for OpenMP Fortran programs: numaaff_omp_bind_team and numaaff_omp_first_touch, the
! Fortran forms of the inline C functions of the same names in numaaff.h. It is a Fortran procedure, not a binding, because
! the C one is static inline (compiled into each OpenMP C program, never exported), and it
! must run under the caller's OpenMP runtime. This file is compiled with OpenMP into the same
! static library as module numaaff; a program that uses it is an OpenMP program and links its
! OpenMP runtime itself, as the C header's users do, and a program that does not use it never
! pulls it out of the archive.
!
!   use numaaff_omp
!   ierr = numaaff_omp_bind_team(0_c_int)   ! then !$omp parallel: each thread on its node
module numaaff_omp
  use, intrinsic :: iso_c_binding, only: c_int, c_ptr, c_size_t, c_signed_char, c_associated, c_f_pointer
  use numaaff, only: numaaff_pin_thread, numaaff_team_node
  implicit none
  private
  public :: numaaff_omp_bind_team, numaaff_omp_first_touch

contains

  ! Pins each thread of the next parallel regions of `team_size` threads (0: the runtime's
  ! default) on the node numaaff_team_node gives it. Returns 0 if every thread was pinned, else
  ! the first error. The runtime keeps the same threads for later regions of that size.
  integer(c_int) function numaaff_omp_bind_team(team_size) result(first_error)
    ! omp_lib here, not at module level: numaaff_omp.mod then does not depend on the
    ! omp_lib.mod of the compiler that built it.
    use omp_lib, only: omp_get_max_threads, omp_get_thread_num, omp_get_num_threads
    integer(c_int), value :: team_size
    integer(c_int) :: first, e
    first = 0
    if (team_size <= 0) team_size = int(omp_get_max_threads(), c_int)
    !$omp parallel num_threads(team_size) private(e) shared(first)
    e = numaaff_pin_thread(numaaff_team_node(int(omp_get_thread_num(), c_int), int(omp_get_num_threads(), c_int)))
    if (e /= 0) then
      ! The same critical name as the C function's: one lock for both forms.
      !$omp critical(numaaff_omp_bind_team)
      if (first == 0) first = e
      !$omp end critical(numaaff_omp_bind_team)
    end if
    !$omp end parallel
    first_error = first
  end function

  ! First touch by the static schedule: each thread of a parallel region zero-fills the
  ! elements this OpenMP runtime's own schedule(static) gives it, of the `count` elements of
  ! `elem_bytes` bytes at `data` (c_loc of the array), so that later `!$omp do
  ! schedule(static)` loops of `count` iterations find each thread's elements on its node,
  ! whichever runtime cuts them. 0, or EINVAL (22) for a null `data` with count > 0 or an
  ! overflow.
  integer(c_int) function numaaff_omp_first_touch(data, count, elem_bytes) result(error)
    type(c_ptr), value :: data
    integer(c_size_t), value :: count, elem_bytes
    integer(c_signed_char), pointer :: bytes(:)
    integer(c_size_t) :: i, first, last
    error = 0
    if (count == 0 .or. elem_bytes == 0) return
    if (.not. c_associated(data) .or. count > huge(count) / elem_bytes) then
      error = 22
      return
    end if
    call c_f_pointer(data, bytes, [count * elem_bytes])
    !$omp parallel private(i, first, last)
    first = 0
    last = -1
    ! This thread's share of a schedule(static) loop is one contiguous run of iterations.
    !$omp do schedule(static)
    do i = 1, count
      if (first == 0) first = i
      last = i
    end do
    !$omp end do nowait
    if (last >= first .and. first > 0) bytes((first - 1) * elem_bytes + 1:last * elem_bytes) = 0_c_signed_char
    !$omp end parallel
  end function
end module numaaff_omp
