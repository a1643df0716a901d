"""BF16's PTX routines: FP16's, with the operands' type changed.

mma.sync and wgmma take bf16 operands in the same fragments, registers and
descriptors as f16 ones, accumulating in f32; only the instruction's type
names differ (``.f32.f16.f16`` -> ``.f32.bf16.bf16``), and the SASS opcode
gains ``.BF16``. So the FP16 routines that accumulate in f32 are the one
source: ``ptx_asm/mma_bf16.ptx`` and ``ptx_asm/wgmma_bf16.ptx`` are their
twins, written by this module and checked against it by the tests
(tests/test_ptx_twins.py), never edited by hand.

    python -m numgemm.ptx_twins          rewrite the twins from their sources
"""

import re
import sys

from .toolchain import PTX_DIR

#: The twinned files: source -> twin, and the routines of the source that have a bf16 form
#: (f32 accumulators; FP16's f16-accumulating mma has no bf16 counterpart).
SOURCES = {"mma.ptx": ("mma_bf16.ptx", re.compile(r"numgemm_mma_m16n8k\d+_f16_f32$")),
           "wgmma.ptx": ("wgmma_bf16.ptx", re.compile(r"numgemm_wgmma_m64n\d+k16_f32_f16_f16(_tb)?$"))}

_FUNC = re.compile(r"((?:^//[^\n]*\n)*)^\.visible\s+\.func\s*(?:\([^)]*\))?\s*(\w+)\s*\(.*?^\}\n", re.M | re.S)
_SASS = re.compile(r"(SASS:\s*(?://\s*)?HG?MMA\.\S+?\.F32)\b")      # the opcode may open the next line


def twin_text(source_name, text):
    """The twin file of one source file's text."""
    target, wanted = SOURCES[source_name]
    head = re.match(r"(?:^//[^\n]*\n)*", text, re.M).group(0)
    directives = "".join(line + "\n" for line in text.splitlines() if line.startswith((".version", ".target",
                                                                                       ".address_size")))
    out = [f"// numgemm: {target}, written by numgemm/ptx_twins.py from {source_name}: its routines that\n"
           "// accumulate f16 operands in f32, with bf16 operands (the same fragments, registers and\n"
           "// descriptors; `python -m numgemm.ptx_twins` rewrites it). What follows is the source's header.\n"
           "//\n", head, directives]
    for m in _FUNC.finditer(text):
        if wanted.match(m.group(2)):
            out.append("\n" + _bf16(m.group(0)))
    return "".join(out)


def _bf16(routine):
    """One routine with bf16 operands: its name, instruction, comments and SASS opcode."""
    routine = _SASS.sub(r"\1.BF16", routine)
    return re.sub(r"\bf16\b|(?<=_)f16(?=_|\()|(?<=\.)f16(?=\.|\s)", "bf16", routine)


def twins():
    """{twin path: its text} from the sources in ptx_asm/."""
    return {PTX_DIR / target: twin_text(name, (PTX_DIR / name).read_text()) for name, (target, _) in SOURCES.items()}


def main():
    for path, text in twins().items():
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
