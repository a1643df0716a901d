"""Prepared launches and repeated calls: what moves when a call brings other
arrays. The GPU side (every family, on new arrays, exact) is in test_api."""

import ctypes

from numgemm import tensormap
from numgemm.launches import Address, Launch, Repeat

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


def test_rebind_moves_address_arguments_only():
    launch = _launch()
    launch.rebind({A: A + 0x100000, C: C + 0x100000})
    assert launch.addresses() == [A + 0x100000, B, MAP, C + 0x100000]
    assert _param(launch, 4) == A + 0x100000            # what the driver reads: the parameter array
    assert _param(launch, 16) == C                      # a plain int, not an address argument
    assert ctypes.c_int32.from_address(launch._params[14]).value == A & 0xFFFF


def test_a_repeat_binds_new_addresses_and_keeps_maps_that_do_not_move():
    maps = tensormap.Maps(None, MAP, (0, (B + 0x40, (1, 8, 64), (512, 64, 1), 8, 64)))   # another array's
    repeat = Repeat(_launch(), (A, B, C), [maps])
    repeat._bind((A + 0x1000, B + 0x1000, C), 0)
    assert repeat.bound == (A + 0x1000, B + 0x1000, C)
    assert repeat.launch.addresses() == [A + 0x1000, B + 0x1000, MAP, C]
    assert repeat.maps[0] is maps
    repeat._bind((A, B, C + 0x2000), 0)                 # back, and only C moved
    assert repeat.launch.addresses() == [A, B, MAP, C + 0x2000]


def test_a_repeat_remembers_the_maps_of_recent_addresses(monkeypatch):
    made = []

    def moved(held, moves, stream=0, alloc=None):      # a new Maps per call, as tensormap.moved writes one
        device, *specs = held.key
        new = tensormap.Maps(None, MAP + 0x100 * (len(made) + 1),
                             (device, *((moves.get(p, p), *rest) for p, *rest in specs)))
        made.append(new)
        return new

    monkeypatch.setattr(tensormap, "moved", moved)
    maps = tensormap.Maps(None, MAP, (0, (A, (1, 8, 64), (512, 64, 1), 8, 64), (B, (1, 8, 64), (512, 64, 1), 8, 64)))
    repeat = Repeat(_launch(), (A, B, C), [maps])
    repeat._bind((A + 0x1000, B, C + 0x10), 0)          # A moved: its maps made once
    assert len(made) == 1 and repeat.launch.addresses() == [A + 0x1000, B, made[0].address, C + 0x10]
    repeat._bind((A, B, C), 0)                          # back: the first maps, remembered
    assert len(made) == 1 and repeat.launch.addresses() == [A, B, MAP, C]
    repeat._bind((A + 0x1000, B, C), 0)                 # and again: remembered too
    assert len(made) == 1 and repeat.launch.addresses() == [A + 0x1000, B, made[0].address, C]
    assert repeat.maps == [made[0]]
