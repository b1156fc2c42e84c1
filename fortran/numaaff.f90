! numaaff for Fortran: the C API (numaaff.h) through ISO_C_BINDING. Every function returns 0
! or an errno value, or a c_ptr that is c_null_ptr on failure; nodes are the kernel's numbers.
! Memory from numaaff_alloc_* is used through c_f_pointer and freed with numaaff_free, giving
! the same size in bytes. A range is (c_loc(a), bytes), e.g. bytes = size(a) * c_sizeof(a(1)).
! C `unsigned` arguments (weights) are integer(c_int): Fortran has no unsigned kind, and the
! values they carry stay far below 2**31. numaaff_omp_bind_team is in module numaaff_omp
! (fortran/numaaff_omp.f90), for programs compiled with OpenMP.
! tests/fortran/check_interfaces.py compares this module with numaaff.h (ctest
! fortran.interfaces_match_header): a function, constant or struct member added there must be
! added here.
!
!   use numaaff
!   real(c_double), pointer :: a(:)
!   type(c_ptr) :: p
!   p = numaaff_alloc_onnode(n * 8_c_size_t, 0_c_int)
!   call c_f_pointer(p, a, [n])
!   ierr = numaaff_next_touch(p, n * 8_c_size_t)   ! each page follows its next toucher
!
! The heap by kind gives array pointers directly (numaaff_kind_allocate, below):
!
!   real(c_double), pointer :: b(:, :)
!   call numaaff_kind_allocate(numaaff_kind_local, b, [n, m], ierr)   ! ierr 0, or b null()
!   call numaaff_kind_deallocate(b)                                    ! b null() again
module numaaff
  use, intrinsic :: iso_c_binding
  implicit none
  private
  public :: numaaff_move_result, numaaff_next_touch_stats, numaaff_keep, numaaff_node_counters, numaaff_snapshot, &
    numaaff_process_counters, numaaff_snapshot_process, numaaff_snapshot_steals, numaaff_snapshot_heap, numaaff_heap_kinds
  public :: numaaff_node_count, numaaff_nodes, numaaff_cpu_nodes, numaaff_current_node, numaaff_distance
  public :: numaaff_cpus_of
  public :: numaaff_pin_thread, numaaff_set_homenode, numaaff_homenode, numaaff_team_node
  public :: numaaff_static_thread, numaaff_static_node
  public :: numaaff_alloc_onnode, numaaff_alloc_local, numaaff_alloc_interleaved, numaaff_free
  public :: numaaff_alloc_onnode_huge, numaaff_alloc_local_huge
  public :: numaaff_huge_per_block, numaaff_huge_never, numaaff_huge_always
  public :: numaaff_move_to, numaaff_place_blocks, numaaff_weighted_interleave, numaaff_bandwidth_weights
  public :: numaaff_promote, numaaff_demote, numaaff_pages_on, numaaff_pages_unpopulated
  public :: numaaff_next_touch, numaaff_next_touch_blocks, numaaff_place_blocks_on_next_touch
  public :: numaaff_disarm, numaaff_touch_now, numaaff_get_next_touch_stats, numaaff_reset_next_touch_stats
  public :: numaaff_system_report, numaaff_strerror, numaaff_page_bytes
  public :: numaaff_kind, numaaff_kind_local, numaaff_kind_interleave, numaaff_kind_fastest, numaaff_kind_capacity
  public :: numaaff_kind_onnode, numaaff_kind_with, numaaff_kind_equal
  public :: numaaff_kind_malloc, numaaff_kind_calloc, numaaff_kind_realloc, numaaff_kind_posix_memalign
  public :: numaaff_kind_free, numaaff_kind_usable_size, numaaff_kind_allocate, numaaff_kind_deallocate
  public :: numaaff_kind_target_node, numaaff_kind_target_local, numaaff_kind_target_interleave
  public :: numaaff_kind_target_fastest, numaaff_kind_target_capacity
  public :: numaaff_kind_preferred, numaaff_kind_pages_default, numaaff_kind_pages_no_huge, numaaff_kind_pages_thp
  public :: numaaff_kind_pages_huge_2mb, numaaff_kind_pages_huge_1gb

  type, bind(C) :: numaaff_move_result
    integer(c_size_t) :: total, moved, already_there, unpopulated, failed, carried
    integer(c_int) :: first_error
  end type numaaff_move_result

  ! A kind of memory (numaaff.h's heap by kind): fill it only from the kinds below,
  ! numaaff_kind_onnode and numaaff_kind_with. `options` is unsigned in C.
  type, bind(C) :: numaaff_kind
    integer(c_int) :: target, node, options
  end type numaaff_kind

  type, bind(C) :: numaaff_next_touch_stats
    integer(c_long_long) :: faults, chunks_migrated, pages_moved, pages_failed, pages_unpopulated
    integer(c_long_long) :: chunks_released, handler_ns, pages_already_there
  end type numaaff_next_touch_stats

  ! One node's live counters (numaaff_snapshot); the unsigned members are c_long_long here.
  type, bind(C) :: numaaff_node_counters
    integer(c_long_long) :: node
    integer(c_long_long) :: workers, tasks_run, stolen_local, stolen_in, stolen_out, sleeps
    integer(c_long_long) :: worker_ns, idle_ns, queued
    integer(c_long_long) :: next_touch_chunks, next_touch_pages_moved, next_touch_pages_already_there, next_touch_pages_failed
    integer(c_long_long) :: pages_moved, pages_not_moved, heap_bound_bytes, heap_preferred_bytes
    integer(c_long_long) :: next_touch_faults
  end type numaaff_node_counters

  ! What a process counts as a whole (numaaff_snapshot_process): pools, workers, refusals.
  type, bind(C) :: numaaff_process_counters
    integer(c_long_long) :: pools, workers
    integer(c_long_long) :: policies_skipped, mappings_unbound, pages_unmoved, threads_unpinned
    integer(c_long_long) :: weighted_fallbacks, huge_page_fallbacks
  end type numaaff_process_counters

  ! The owner that leaves a block where it is (NUMAAFF_KEEP), for numaaff_place_blocks and
  ! numaaff_place_blocks_on_next_touch.
  integer(c_int), parameter :: numaaff_keep = -2
  ! Huge pages in a block (NUMAAFF_HUGE_*), for numaaff_alloc_onnode_huge and _local_huge.
  integer(c_int), parameter :: numaaff_huge_per_block = 0, numaaff_huge_never = 1, numaaff_huge_always = 2

  integer(c_int), parameter :: numaaff_kind_target_node = 0, numaaff_kind_target_local = 1
  integer(c_int), parameter :: numaaff_kind_target_interleave = 2, numaaff_kind_target_fastest = 3
  integer(c_int), parameter :: numaaff_kind_target_capacity = 4
  integer(c_int), parameter :: numaaff_heap_kinds = 5  ! NUMAAFF_HEAP_KINDS: rows of numaaff_snapshot_heap
  integer(c_int), parameter :: numaaff_kind_preferred = 1, numaaff_kind_pages_default = 0
  integer(c_int), parameter :: numaaff_kind_pages_no_huge = 16, numaaff_kind_pages_thp = 32
  integer(c_int), parameter :: numaaff_kind_pages_huge_2mb = 64, numaaff_kind_pages_huge_1gb = 128

  ! The constant kinds (numaaff.h's NUMAAFF_KIND_LOCAL and the others): the same values as
  ! parameters, so that no Fortran copy of a C variable can shadow them.
  type(numaaff_kind), parameter :: numaaff_kind_local = numaaff_kind(numaaff_kind_target_local, -1, 0)
  type(numaaff_kind), parameter :: numaaff_kind_interleave = numaaff_kind(numaaff_kind_target_interleave, -1, 0)
  type(numaaff_kind), parameter :: numaaff_kind_fastest = numaaff_kind(numaaff_kind_target_fastest, -1, 0)
  type(numaaff_kind), parameter :: numaaff_kind_capacity = numaaff_kind(numaaff_kind_target_capacity, -1, 0)

  interface
    integer(c_int) function numaaff_node_count() bind(C, name="numaaff_node_count")
      import :: c_int
    end function
    integer(c_int) function numaaff_nodes(nodes, capacity, count) bind(C, name="numaaff_nodes")
      import :: c_int, c_size_t
      integer(c_int), intent(out) :: nodes(*)
      integer(c_size_t), value :: capacity
      integer(c_size_t), intent(out) :: count
    end function
    integer(c_int) function numaaff_cpu_nodes(nodes, capacity, count) bind(C, name="numaaff_cpu_nodes")
      import :: c_int, c_size_t
      integer(c_int), intent(out) :: nodes(*)
      integer(c_size_t), value :: capacity
      integer(c_size_t), intent(out) :: count
    end function
    integer(c_int) function numaaff_cpus_of(node, cpus, capacity, count) bind(C, name="numaaff_cpus_of")
      import :: c_int, c_size_t
      integer(c_int), value :: node
      integer(c_int), intent(out) :: cpus(*)
      integer(c_size_t), value :: capacity
      integer(c_size_t), intent(out) :: count
    end function
    integer(c_int) function numaaff_current_node() bind(C, name="numaaff_current_node")
      import :: c_int
    end function
    integer(c_int) function numaaff_distance(from, to, distance) bind(C, name="numaaff_distance")
      import :: c_int
      integer(c_int), value :: from, to
      integer(c_int), intent(out) :: distance
    end function

    integer(c_int) function numaaff_pin_thread(node) bind(C, name="numaaff_pin_thread")
      import :: c_int
      integer(c_int), value :: node
    end function
    integer(c_int) function numaaff_set_homenode(node) bind(C, name="numaaff_set_homenode")
      import :: c_int
      integer(c_int), value :: node
    end function
    integer(c_int) function numaaff_homenode() bind(C, name="numaaff_homenode")
      import :: c_int
    end function
    integer(c_int) function numaaff_team_node(thread, team_size) bind(C, name="numaaff_team_node")
      import :: c_int
      integer(c_int), value :: thread, team_size
    end function
    ! index is 0-based, as in C: iteration i of a Fortran do loop from 1 is index i - 1.
    integer(c_int) function numaaff_static_thread(index, count, team_size) bind(C, name="numaaff_static_thread")
      import :: c_int, c_size_t
      integer(c_size_t), value :: index, count
      integer(c_int), value :: team_size
    end function
    integer(c_int) function numaaff_static_node(index, count, team_size) bind(C, name="numaaff_static_node")
      import :: c_int, c_size_t
      integer(c_size_t), value :: index, count
      integer(c_int), value :: team_size
    end function

    type(c_ptr) function numaaff_alloc_onnode(bytes, node) bind(C, name="numaaff_alloc_onnode")
      import :: c_ptr, c_size_t, c_int
      integer(c_size_t), value :: bytes
      integer(c_int), value :: node
    end function
    type(c_ptr) function numaaff_alloc_local(bytes) bind(C, name="numaaff_alloc_local")
      import :: c_ptr, c_size_t
      integer(c_size_t), value :: bytes
    end function
    type(c_ptr) function numaaff_alloc_onnode_huge(bytes, node, huge_pages) bind(C, name="numaaff_alloc_onnode_huge")
      import :: c_ptr, c_size_t, c_int
      integer(c_size_t), value :: bytes
      integer(c_int), value :: node, huge_pages
    end function
    type(c_ptr) function numaaff_alloc_local_huge(bytes, huge_pages) bind(C, name="numaaff_alloc_local_huge")
      import :: c_ptr, c_size_t, c_int
      integer(c_size_t), value :: bytes
      integer(c_int), value :: huge_pages
    end function
    type(c_ptr) function numaaff_alloc_interleaved(bytes) bind(C, name="numaaff_alloc_interleaved")
      import :: c_ptr, c_size_t
      integer(c_size_t), value :: bytes
    end function
    type(numaaff_kind) function numaaff_kind_onnode(node) bind(C, name="numaaff_kind_onnode")
      import :: c_int, numaaff_kind
      integer(c_int), value :: node
    end function
    integer(c_int) function numaaff_kind_with(base, options, out) bind(C, name="numaaff_kind_with")
      import :: c_int, numaaff_kind
      type(numaaff_kind), value :: base
      integer(c_int), value :: options
      type(numaaff_kind), intent(out) :: out
    end function
    integer(c_int) function numaaff_kind_equal(a, b) bind(C, name="numaaff_kind_equal")
      import :: c_int, numaaff_kind
      type(numaaff_kind), value :: a, b
    end function
    type(c_ptr) function numaaff_kind_malloc(k, bytes) bind(C, name="numaaff_kind_malloc")
      import :: c_ptr, c_size_t, numaaff_kind
      type(numaaff_kind), value :: k
      integer(c_size_t), value :: bytes
    end function
    type(c_ptr) function numaaff_kind_calloc(k, count, bytes) bind(C, name="numaaff_kind_calloc")
      import :: c_ptr, c_size_t, numaaff_kind
      type(numaaff_kind), value :: k
      integer(c_size_t), value :: count, bytes
    end function
    type(c_ptr) function numaaff_kind_realloc(k, p, bytes) bind(C, name="numaaff_kind_realloc")
      import :: c_ptr, c_size_t, numaaff_kind
      type(numaaff_kind), value :: k
      type(c_ptr), value :: p
      integer(c_size_t), value :: bytes
    end function
    integer(c_int) function numaaff_kind_posix_memalign(k, out, align, bytes) bind(C, name="numaaff_kind_posix_memalign")
      import :: c_int, c_ptr, c_size_t, numaaff_kind
      type(numaaff_kind), value :: k
      type(c_ptr), intent(out) :: out
      integer(c_size_t), value :: align, bytes
    end function
    subroutine numaaff_kind_free(p) bind(C, name="numaaff_kind_free")
      import :: c_ptr
      type(c_ptr), value :: p
    end subroutine
    integer(c_size_t) function numaaff_kind_usable_size(p) bind(C, name="numaaff_kind_usable_size")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: p
    end function
    subroutine numaaff_free(p, bytes) bind(C, name="numaaff_free")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: p
      integer(c_size_t), value :: bytes
    end subroutine

    integer(c_int) function numaaff_move_to(addr, bytes, node, result) bind(C, name="numaaff_move_to")
      import :: c_ptr, c_size_t, c_int, numaaff_move_result
      type(c_ptr), value :: addr
      integer(c_size_t), value :: bytes
      integer(c_int), value :: node
      type(numaaff_move_result), intent(out) :: result
    end function
    integer(c_int) function numaaff_place_blocks(addr, bytes, block_bytes, owners, owner_count, result) &
        bind(C, name="numaaff_place_blocks")
      import :: c_ptr, c_size_t, c_int, numaaff_move_result
      type(c_ptr), value :: addr
      integer(c_size_t), value :: bytes, block_bytes, owner_count
      integer(c_int), intent(in) :: owners(*)
      type(numaaff_move_result), intent(out) :: result
    end function
    integer(c_int) function numaaff_weighted_interleave(addr, bytes, nodes, weights, count) &
        bind(C, name="numaaff_weighted_interleave")
      import :: c_ptr, c_size_t, c_int
      type(c_ptr), value :: addr
      integer(c_size_t), value :: bytes
      integer(c_int), intent(in) :: nodes(*), weights(*)
      integer(c_size_t), value :: count
    end function
    integer(c_int) function numaaff_bandwidth_weights(nodes, weights, capacity, count) &
        bind(C, name="numaaff_bandwidth_weights")
      import :: c_size_t, c_int
      integer(c_int), intent(out) :: nodes(*), weights(*)
      integer(c_size_t), value :: capacity
      integer(c_size_t), intent(out) :: count
    end function
    integer(c_int) function numaaff_promote(addr, bytes, result) bind(C, name="numaaff_promote")
      import :: c_ptr, c_size_t, c_int, numaaff_move_result
      type(c_ptr), value :: addr
      integer(c_size_t), value :: bytes
      type(numaaff_move_result), intent(out) :: result
    end function
    integer(c_int) function numaaff_demote(addr, bytes, result) bind(C, name="numaaff_demote")
      import :: c_ptr, c_size_t, c_int, numaaff_move_result
      type(c_ptr), value :: addr
      integer(c_size_t), value :: bytes
      type(numaaff_move_result), intent(out) :: result
    end function
    integer(c_int) function numaaff_pages_on(addr, bytes, node, pages) bind(C, name="numaaff_pages_on")
      import :: c_ptr, c_size_t, c_int
      type(c_ptr), value :: addr
      integer(c_size_t), value :: bytes
      integer(c_int), value :: node
      integer(c_size_t), intent(out) :: pages
    end function
    integer(c_int) function numaaff_pages_unpopulated(addr, bytes, pages) bind(C, name="numaaff_pages_unpopulated")
      import :: c_ptr, c_size_t, c_int
      type(c_ptr), value :: addr
      integer(c_size_t), value :: bytes
      integer(c_size_t), intent(out) :: pages
    end function

    integer(c_int) function numaaff_next_touch(addr, bytes) bind(C, name="numaaff_next_touch")
      import :: c_ptr, c_size_t, c_int
      type(c_ptr), value :: addr
      integer(c_size_t), value :: bytes
    end function
    integer(c_int) function numaaff_next_touch_blocks(addr, bytes, block_bytes) bind(C, name="numaaff_next_touch_blocks")
      import :: c_ptr, c_size_t, c_int
      type(c_ptr), value :: addr
      integer(c_size_t), value :: bytes, block_bytes
    end function
    integer(c_int) function numaaff_place_blocks_on_next_touch(addr, bytes, block_bytes, owners, owner_count) &
        bind(C, name="numaaff_place_blocks_on_next_touch")
      import :: c_ptr, c_size_t, c_int
      type(c_ptr), value :: addr
      integer(c_size_t), value :: bytes, block_bytes, owner_count
      integer(c_int), intent(in) :: owners(*)
    end function
    integer(c_int) function numaaff_disarm(addr, bytes) bind(C, name="numaaff_disarm")
      import :: c_ptr, c_size_t, c_int
      type(c_ptr), value :: addr
      integer(c_size_t), value :: bytes
    end function
    integer(c_int) function numaaff_touch_now(addr, bytes) bind(C, name="numaaff_touch_now")
      import :: c_ptr, c_size_t, c_int
      type(c_ptr), value :: addr
      integer(c_size_t), value :: bytes
    end function
    integer(c_int) function numaaff_get_next_touch_stats(stats) bind(C, name="numaaff_get_next_touch_stats")
      import :: c_int, numaaff_next_touch_stats
      type(numaaff_next_touch_stats), intent(out) :: stats
    end function
    integer(c_int) function numaaff_snapshot(pid, nodes, max_nodes, node_count) bind(C, name="numaaff_snapshot")
      import :: c_int, c_long_long, c_size_t, numaaff_node_counters
      integer(c_long_long), value :: pid
      type(numaaff_node_counters), intent(out) :: nodes(*)
      integer(c_size_t), value :: max_nodes
      integer(c_size_t), intent(out) :: node_count
    end function
    integer(c_int) function numaaff_snapshot_process(pid, counters) bind(C, name="numaaff_snapshot_process")
      import :: c_int, c_long_long, numaaff_process_counters
      integer(c_long_long), value :: pid
      type(numaaff_process_counters), intent(out) :: counters
    end function
    integer(c_int) function numaaff_snapshot_steals(pid, steals, max_cells, node_count) bind(C, name="numaaff_snapshot_steals")
      import :: c_int, c_long_long, c_size_t
      integer(c_long_long), value :: pid
      integer(c_long_long), intent(out) :: steals(*)
      integer(c_size_t), value :: max_cells
      integer(c_size_t), intent(out) :: node_count
    end function
    ! bytes(t + 1, i): what the i-th node holds for kind target t (numaaff_kind_target_*)
    integer(c_int) function numaaff_snapshot_heap(pid, bytes, max_cells, node_count) bind(C, name="numaaff_snapshot_heap")
      import :: c_int, c_long_long, c_size_t
      integer(c_long_long), value :: pid
      integer(c_long_long), intent(out) :: bytes(*)
      integer(c_size_t), value :: max_cells
      integer(c_size_t), intent(out) :: node_count
    end function
    integer(c_int) function numaaff_reset_next_touch_stats() bind(C, name="numaaff_reset_next_touch_stats")
      import :: c_int
    end function

    integer(c_int) function numaaff_system_report_c(text, capacity, length) bind(C, name="numaaff_system_report")
      import :: c_int, c_size_t, c_char
      character(kind=c_char), intent(out) :: text(*)
      integer(c_size_t), value :: capacity
      integer(c_size_t), intent(out) :: length
    end function
    type(c_ptr) function numaaff_strerror_c(error) bind(C, name="numaaff_strerror")
      import :: c_ptr, c_int
      integer(c_int), value :: error
    end function
    integer(c_long) function sysconf_c(name) bind(C, name="sysconf")
      import :: c_long, c_int
      integer(c_int), value :: name
    end function
  end interface

  ! call numaaff_kind_allocate(kind, a, extents[, err]) points the array pointer `a` at a new
  ! block of kind `kind` shaped `extents` (lower bounds 1), as numaaff_kind_malloc would give
  ! it (same alignment, contents undefined). `a` is real(c_double), real(c_float),
  ! integer(c_int), integer(c_int64_t) or complex(c_double_complex), of rank 1, 2 or 3;
  ! `extents` are default integers, one per dimension (the total may exceed huge(0)).
  ! `err` (optional) is 0, or: EINVAL (22) for a negative extent or an invalid kind (e.g.
  ! numaaff_kind_onnode of an unknown node); ENOMEM (12) when the bytes exceed
  ! huge(0_c_size_t) or the kind has no room (a strict kind's node is full); the errno of a
  ! placement the kernel refused. On failure `a` is null(); without `err` that is the only sign.
  ! A shape with an extent 0 still checks the kind and gives an associated, zero-size `a`
  ! (size(a) == 0) that holds no heap memory: C_LOC is not allowed on a zero-size array, so no
  ! block is kept for it.
  ! Free the memory with numaaff_kind_deallocate(a) only (or numaaff_kind_free(c_loc(a)) for a
  ! non-empty `a`), never with Fortran's deallocate; `a` must still point at the whole array.
  ! It frees the block and nullifies `a`; a null `a` is a no-op. Thread safety as the C calls:
  ! any thread may allocate, and any thread may free a block another allocated. One node (or a
  ! sandbox): works, every kind is node 0's memory.
  interface numaaff_kind_allocate
    module procedure kind_allocate_double_1, kind_allocate_double_2, kind_allocate_double_3
    module procedure kind_allocate_float_1, kind_allocate_float_2, kind_allocate_float_3
    module procedure kind_allocate_int_1, kind_allocate_int_2, kind_allocate_int_3
    module procedure kind_allocate_int64_1, kind_allocate_int64_2, kind_allocate_int64_3
    module procedure kind_allocate_complex_1, kind_allocate_complex_2, kind_allocate_complex_3
  end interface numaaff_kind_allocate
  interface numaaff_kind_deallocate
    module procedure kind_deallocate_double_1, kind_deallocate_double_2, kind_deallocate_double_3
    module procedure kind_deallocate_float_1, kind_deallocate_float_2, kind_deallocate_float_3
    module procedure kind_deallocate_int_1, kind_deallocate_int_2, kind_deallocate_int_3
    module procedure kind_deallocate_int64_1, kind_deallocate_int64_2, kind_deallocate_int64_3
    module procedure kind_deallocate_complex_1, kind_deallocate_complex_2, kind_deallocate_complex_3
  end interface numaaff_kind_deallocate

  ! What every zero-size array of numaaff_kind_allocate points at (never read or written).
  complex(c_double_complex), target, save :: zero_size_anchor

contains

  ! The capability report as a Fortran string (allocated to its length).
  function numaaff_system_report() result(text)
    character(len=:), allocatable :: text
    character(kind=c_char), allocatable :: buffer(:)
    integer(c_size_t) :: length, capacity
    integer(c_int) :: ierr
    integer :: i, n
    allocate(buffer(1))
    length = 0
    ierr = numaaff_system_report_c(buffer, 1_c_size_t, length)
    if (ierr /= 0) length = 0
    capacity = length + 1
    deallocate(buffer)
    allocate(buffer(capacity))
    ierr = numaaff_system_report_c(buffer, capacity, length)
    n = 0
    if (ierr == 0) n = int(min(length, capacity - 1))  ! the report may have grown in between
    allocate(character(len=n) :: text)
    do i = 1, n
      text(i:i) = buffer(i)
    end do
  end function

  ! The text of an error value returned by this module.
  function numaaff_strerror(error) result(text)
    integer(c_int), intent(in) :: error
    character(len=:), allocatable :: text
    character(kind=c_char), pointer :: chars(:)
    type(c_ptr) :: p
    integer :: n
    p = numaaff_strerror_c(error)
    n = 0
    if (c_associated(p)) then
      call c_f_pointer(p, chars, [4096])
      do while (chars(n + 1) /= c_null_char)
        n = n + 1
      end do
    end if
    allocate(character(len=n) :: text)
    if (n > 0) text = transfer(chars(1:n), text)
  end function

  ! The page size in bytes (the unit of placement): blocks meant to move alone are multiples of it.
  integer(c_size_t) function numaaff_page_bytes()
    integer(c_int), parameter :: sc_pagesize = 30  ! _SC_PAGESIZE on Linux
    numaaff_page_bytes = int(sysconf_c(sc_pagesize), c_size_t)
  end function

  ! The block of numaaff_kind_allocate: product(extents) elements of element_bits bits each, of
  ! kind k, or c_null_ptr with the error in err (when present). The error is the result of
  ! numaaff_kind_posix_memalign, called with numaaff_kind_malloc's alignment (the same block):
  ! numaaff_kind_malloc reports through errno, a C macro Fortran has no portable binding for
  ! (glibc's __errno_location is an implementation detail).
  function kind_block(k, element_bits, extents, err) result(p)
    type(numaaff_kind), intent(in) :: k
    integer, intent(in) :: element_bits, extents(:)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p, new_block
    integer(c_size_t), parameter :: malloc_align = 16  ! alignof(max_align_t) on x86-64, AArch64
    integer(c_int), parameter :: einval = 22, enomem = 12
    integer(c_size_t) :: bytes
    integer(c_int) :: e
    integer :: i
    p = c_null_ptr
    bytes = element_bits / 8
    e = 0
    if (any(extents < 0)) then
      e = einval
    else if (any(extents == 0)) then
      bytes = 0
    else
      do i = 1, size(extents)
        if (bytes > huge(bytes) / extents(i)) then
          e = enomem
          exit
        end if
        bytes = bytes * extents(i)
      end do
    end if
    if (e == 0) e = numaaff_kind_posix_memalign(k, new_block, malloc_align, bytes)
    if (e == 0) then
      p = new_block
      if (bytes == 0) then  ! no block for a zero-size array (see numaaff_kind_allocate)
        call numaaff_kind_free(new_block)
        p = c_loc(zero_size_anchor)
      end if
    end if
    if (present(err)) err = e
  end function

  ! The specific procedures of numaaff_kind_allocate and numaaff_kind_deallocate: one pair per
  ! type and rank, the same code but for the declaration of `a`.
  subroutine kind_allocate_double_1(k, a, extents, err)
    type(numaaff_kind), intent(in) :: k
    real(c_double), pointer, intent(out) :: a(:)
    integer, intent(in) :: extents(1)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p
    a => null()
    p = kind_block(k, storage_size(a), extents, err)
    if (c_associated(p)) call c_f_pointer(p, a, extents)
  end subroutine
  subroutine kind_deallocate_double_1(a)
    real(c_double), pointer, intent(inout) :: a(:)
    if (associated(a)) then
      if (size(a) > 0) call numaaff_kind_free(c_loc(a))
    end if
    a => null()
  end subroutine

  subroutine kind_allocate_double_2(k, a, extents, err)
    type(numaaff_kind), intent(in) :: k
    real(c_double), pointer, intent(out) :: a(:, :)
    integer, intent(in) :: extents(2)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p
    a => null()
    p = kind_block(k, storage_size(a), extents, err)
    if (c_associated(p)) call c_f_pointer(p, a, extents)
  end subroutine
  subroutine kind_deallocate_double_2(a)
    real(c_double), pointer, intent(inout) :: a(:, :)
    if (associated(a)) then
      if (size(a) > 0) call numaaff_kind_free(c_loc(a))
    end if
    a => null()
  end subroutine

  subroutine kind_allocate_double_3(k, a, extents, err)
    type(numaaff_kind), intent(in) :: k
    real(c_double), pointer, intent(out) :: a(:, :, :)
    integer, intent(in) :: extents(3)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p
    a => null()
    p = kind_block(k, storage_size(a), extents, err)
    if (c_associated(p)) call c_f_pointer(p, a, extents)
  end subroutine
  subroutine kind_deallocate_double_3(a)
    real(c_double), pointer, intent(inout) :: a(:, :, :)
    if (associated(a)) then
      if (size(a) > 0) call numaaff_kind_free(c_loc(a))
    end if
    a => null()
  end subroutine

  subroutine kind_allocate_float_1(k, a, extents, err)
    type(numaaff_kind), intent(in) :: k
    real(c_float), pointer, intent(out) :: a(:)
    integer, intent(in) :: extents(1)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p
    a => null()
    p = kind_block(k, storage_size(a), extents, err)
    if (c_associated(p)) call c_f_pointer(p, a, extents)
  end subroutine
  subroutine kind_deallocate_float_1(a)
    real(c_float), pointer, intent(inout) :: a(:)
    if (associated(a)) then
      if (size(a) > 0) call numaaff_kind_free(c_loc(a))
    end if
    a => null()
  end subroutine

  subroutine kind_allocate_float_2(k, a, extents, err)
    type(numaaff_kind), intent(in) :: k
    real(c_float), pointer, intent(out) :: a(:, :)
    integer, intent(in) :: extents(2)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p
    a => null()
    p = kind_block(k, storage_size(a), extents, err)
    if (c_associated(p)) call c_f_pointer(p, a, extents)
  end subroutine
  subroutine kind_deallocate_float_2(a)
    real(c_float), pointer, intent(inout) :: a(:, :)
    if (associated(a)) then
      if (size(a) > 0) call numaaff_kind_free(c_loc(a))
    end if
    a => null()
  end subroutine

  subroutine kind_allocate_float_3(k, a, extents, err)
    type(numaaff_kind), intent(in) :: k
    real(c_float), pointer, intent(out) :: a(:, :, :)
    integer, intent(in) :: extents(3)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p
    a => null()
    p = kind_block(k, storage_size(a), extents, err)
    if (c_associated(p)) call c_f_pointer(p, a, extents)
  end subroutine
  subroutine kind_deallocate_float_3(a)
    real(c_float), pointer, intent(inout) :: a(:, :, :)
    if (associated(a)) then
      if (size(a) > 0) call numaaff_kind_free(c_loc(a))
    end if
    a => null()
  end subroutine

  subroutine kind_allocate_int_1(k, a, extents, err)
    type(numaaff_kind), intent(in) :: k
    integer(c_int), pointer, intent(out) :: a(:)
    integer, intent(in) :: extents(1)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p
    a => null()
    p = kind_block(k, storage_size(a), extents, err)
    if (c_associated(p)) call c_f_pointer(p, a, extents)
  end subroutine
  subroutine kind_deallocate_int_1(a)
    integer(c_int), pointer, intent(inout) :: a(:)
    if (associated(a)) then
      if (size(a) > 0) call numaaff_kind_free(c_loc(a))
    end if
    a => null()
  end subroutine

  subroutine kind_allocate_int_2(k, a, extents, err)
    type(numaaff_kind), intent(in) :: k
    integer(c_int), pointer, intent(out) :: a(:, :)
    integer, intent(in) :: extents(2)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p
    a => null()
    p = kind_block(k, storage_size(a), extents, err)
    if (c_associated(p)) call c_f_pointer(p, a, extents)
  end subroutine
  subroutine kind_deallocate_int_2(a)
    integer(c_int), pointer, intent(inout) :: a(:, :)
    if (associated(a)) then
      if (size(a) > 0) call numaaff_kind_free(c_loc(a))
    end if
    a => null()
  end subroutine

  subroutine kind_allocate_int_3(k, a, extents, err)
    type(numaaff_kind), intent(in) :: k
    integer(c_int), pointer, intent(out) :: a(:, :, :)
    integer, intent(in) :: extents(3)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p
    a => null()
    p = kind_block(k, storage_size(a), extents, err)
    if (c_associated(p)) call c_f_pointer(p, a, extents)
  end subroutine
  subroutine kind_deallocate_int_3(a)
    integer(c_int), pointer, intent(inout) :: a(:, :, :)
    if (associated(a)) then
      if (size(a) > 0) call numaaff_kind_free(c_loc(a))
    end if
    a => null()
  end subroutine

  subroutine kind_allocate_int64_1(k, a, extents, err)
    type(numaaff_kind), intent(in) :: k
    integer(c_int64_t), pointer, intent(out) :: a(:)
    integer, intent(in) :: extents(1)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p
    a => null()
    p = kind_block(k, storage_size(a), extents, err)
    if (c_associated(p)) call c_f_pointer(p, a, extents)
  end subroutine
  subroutine kind_deallocate_int64_1(a)
    integer(c_int64_t), pointer, intent(inout) :: a(:)
    if (associated(a)) then
      if (size(a) > 0) call numaaff_kind_free(c_loc(a))
    end if
    a => null()
  end subroutine

  subroutine kind_allocate_int64_2(k, a, extents, err)
    type(numaaff_kind), intent(in) :: k
    integer(c_int64_t), pointer, intent(out) :: a(:, :)
    integer, intent(in) :: extents(2)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p
    a => null()
    p = kind_block(k, storage_size(a), extents, err)
    if (c_associated(p)) call c_f_pointer(p, a, extents)
  end subroutine
  subroutine kind_deallocate_int64_2(a)
    integer(c_int64_t), pointer, intent(inout) :: a(:, :)
    if (associated(a)) then
      if (size(a) > 0) call numaaff_kind_free(c_loc(a))
    end if
    a => null()
  end subroutine

  subroutine kind_allocate_int64_3(k, a, extents, err)
    type(numaaff_kind), intent(in) :: k
    integer(c_int64_t), pointer, intent(out) :: a(:, :, :)
    integer, intent(in) :: extents(3)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p
    a => null()
    p = kind_block(k, storage_size(a), extents, err)
    if (c_associated(p)) call c_f_pointer(p, a, extents)
  end subroutine
  subroutine kind_deallocate_int64_3(a)
    integer(c_int64_t), pointer, intent(inout) :: a(:, :, :)
    if (associated(a)) then
      if (size(a) > 0) call numaaff_kind_free(c_loc(a))
    end if
    a => null()
  end subroutine

  subroutine kind_allocate_complex_1(k, a, extents, err)
    type(numaaff_kind), intent(in) :: k
    complex(c_double_complex), pointer, intent(out) :: a(:)
    integer, intent(in) :: extents(1)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p
    a => null()
    p = kind_block(k, storage_size(a), extents, err)
    if (c_associated(p)) call c_f_pointer(p, a, extents)
  end subroutine
  subroutine kind_deallocate_complex_1(a)
    complex(c_double_complex), pointer, intent(inout) :: a(:)
    if (associated(a)) then
      if (size(a) > 0) call numaaff_kind_free(c_loc(a))
    end if
    a => null()
  end subroutine

  subroutine kind_allocate_complex_2(k, a, extents, err)
    type(numaaff_kind), intent(in) :: k
    complex(c_double_complex), pointer, intent(out) :: a(:, :)
    integer, intent(in) :: extents(2)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p
    a => null()
    p = kind_block(k, storage_size(a), extents, err)
    if (c_associated(p)) call c_f_pointer(p, a, extents)
  end subroutine
  subroutine kind_deallocate_complex_2(a)
    complex(c_double_complex), pointer, intent(inout) :: a(:, :)
    if (associated(a)) then
      if (size(a) > 0) call numaaff_kind_free(c_loc(a))
    end if
    a => null()
  end subroutine

  subroutine kind_allocate_complex_3(k, a, extents, err)
    type(numaaff_kind), intent(in) :: k
    complex(c_double_complex), pointer, intent(out) :: a(:, :, :)
    integer, intent(in) :: extents(3)
    integer(c_int), intent(out), optional :: err
    type(c_ptr) :: p
    a => null()
    p = kind_block(k, storage_size(a), extents, err)
    if (c_associated(p)) call c_f_pointer(p, a, extents)
  end subroutine
  subroutine kind_deallocate_complex_3(a)
    complex(c_double_complex), pointer, intent(inout) :: a(:, :, :)
    if (associated(a)) then
      if (size(a) > 0) call numaaff_kind_free(c_loc(a))
    end if
    a => null()
  end subroutine
end module numaaff
