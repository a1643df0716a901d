"""Repeated calls: what moves when a call brings other arrays. The GPU side
(every family, on new arrays, exact) is in test_api."""

from numgemm import tensormap
from numgemm.repeats import Repeat
from tests.test_launches import A, B, C, MAP, _launch


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
