"""Prepared launches: their packed arguments, and which of them move."""

import ctypes

from numgemm.launches import Address, Launch

A, B, C, MAP = 0x7F0000100000, 0x7F0000200000, 0x7F0000300000, 0x7F0000900000


def _launch():
    """A GEMM's arguments as kernel.launch_args packs them (an array: meminfo,
    parent, size, itemsize, data, shape, strides), then a second launch
    reading C (split-K's sum)."""
    gemm = [0, 0, 64, 1, Address(A), 8, 8, 0, 0, 64, 1, Address(B), 8, 8, ctypes.c_int32(A & 0xFFFF),
            Address(MAP), C]     # a scalar that is not an address, and a plain int equal to C's: never moved
    return Launch(0, (1, 1, 1), 128, 0, 0, gemm, "gemm", then=Launch(0, (1, 1, 1), 128, 0, 0, [Address(C)], "sum"))


def _param(launch, i):
    return ctypes.c_int64.from_address(launch._params[i]).value


def test_an_address_moves_through_its_slots_only():
    launch = _launch()
    for address in (A, C):
        for slot in launch.slots(address):
            slot.value = address + 0x100000
    assert launch.addresses() == [A + 0x100000, B, MAP, C + 0x100000]
    assert _param(launch, 4) == A + 0x100000            # what the driver reads: the parameter array
    assert _param(launch, 16) == C                      # a plain int, not an address argument
    assert ctypes.c_int32.from_address(launch._params[14]).value == A & 0xFFFF
