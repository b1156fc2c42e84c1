! A Fortran user's program built by a Makefile: module numaaff and
! `pkg-config --cflags --libs numaaff-fortran`, nothing else.
program fortran_consumer
  use, intrinsic :: iso_c_binding
  use numaaff
  implicit none
  integer(c_int) :: nodes(64)
  integer(c_size_t) :: count, bytes
  type(c_ptr) :: p
  real(c_double), pointer :: a(:)

  if (numaaff_nodes(nodes, 64_c_size_t, count) /= 0) stop 1
  bytes = 1048576_c_size_t
  p = numaaff_alloc_onnode(bytes, nodes(1))
  if (.not. c_associated(p)) stop 2
  call c_f_pointer(p, a, [bytes / 8])
  a = 1
  if (numaaff_next_touch(p, bytes) /= 0) stop 3
  a(12345) = 2
  if (sum(a) /= real(bytes / 8 + 1, c_double)) stop 4
  call numaaff_free(p, bytes)
  write (*, '(a, i0, a)') 'Fortran consumer: ', count, ' node(s)'
end program fortran_consumer
