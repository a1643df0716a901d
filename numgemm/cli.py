"""What the command lines (bench.py, numgemm.inspect) share: a bad argument
ends in one line and exit status 2, and a closed pipe (`| head`) ends quietly."""

import functools
import os
import sys


class UsageError(Exception):
    """An argument the command cannot use; its message is the whole report."""


def kernel_names(names, presets):
    """Refuse a name no preset of presets registers (as a name or a config's name),
    with the nearest registered names."""
    from . import registry

    for name in names or ():
        for preset in presets:
            try:
                registry.get(name, preset)
                break
            except KeyError:
                continue
        else:
            raise UsageError(registry.unknown(name, presets[0]))


def entry(prog):
    """Decorate a main(argv) -> status: UsageError prints `prog: message` and
    returns 2; a BrokenPipeError (the reader went away) returns 1 silently."""
    def wrap(main):
        @functools.wraps(main)
        def run(argv=None):
            try:
                return main(argv)
            except UsageError as e:
                print(f"{prog}: {e}", file=sys.stderr)
                return 2
            except BrokenPipeError:
                # Python would report the pipe again when it flushes stdout at exit.
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                return 1
        return run
    return wrap
