"""numgemm.tensormap: the strides a tensor map takes (the maps themselves need
the driver: the GPU tests of copy="tma" kernels use them)."""

from numgemm.tensormap import box_strides


def test_strides_of_a_batch_of_matrices():
    assert box_strides((3, 260, 520), (260 * 528, 528, 1)) == (528, 260 * 528)


def test_an_axis_of_one_gets_the_stride_its_neighbours_imply():
    """A single matrix, or B shared by every batch: its batch stride is
    whatever the caller's view says (often 0), not one TMA accepts."""
    assert box_strides((1, 64, 128), (0, 128, 1)) == (128, 64 * 128)
    assert box_strides((1, 1, 8), (8, 8, 1)) == (16, 16)       # a row of 8 bytes, padded to 16
