! An OpenMP Fortran user's program built by a Makefile: module numaaff_omp, the compiler's
! OpenMP flag and `pkg-config --cflags --libs numaaff-fortran`. It binds the team, first-touches
! an array by the static schedule and checks that every element was written.
program fortran_omp_consumer
  use, intrinsic :: iso_c_binding
  use omp_lib
  use numaaff_omp
  implicit none
  real(c_double), allocatable, target :: a(:)
  integer(c_size_t), parameter :: n = 100003_c_size_t

  if (numaaff_omp_bind_team(0_c_int) /= 0) stop 1
  allocate (a(n))
  a = 1.0_c_double
  if (numaaff_omp_first_touch(c_loc(a), n, int(c_sizeof(a(1)), c_size_t)) /= 0) stop 2
  if (any(a /= 0.0_c_double)) stop 3
  if (numaaff_omp_first_touch(c_null_ptr, n, 8_c_size_t) /= 22) stop 4
  write (*, '(a, i0, a)') 'Fortran OpenMP consumer: ', omp_get_max_threads(), ' thread(s), static first touch'
end program fortran_omp_consumer
