"""PTX routines that are others with the operands' type changed.

mma.sync and wgmma take bf16 operands in the same fragments, registers and
descriptors as f16 ones, and FP8's (e4m3, e5m2) in those of s8, accumulating
in f32: only the instruction's type names differ (``.f32.f16.f16`` ->
``.f32.bf16.bf16``; ``.s32.s8.s8`` -> ``.f32.e4m3.e4m3``, with f32 registers
for the sums and, for wgmma, the float forms' imm-scale-a and imm-scale-b).
So FP16's and INT8's routines are the one source: ``ptx_asm/*_bf16.ptx``
and ``ptx_asm/*_fp8.ptx`` are their twins, written by this module and
checked against it by the tests (tests/test_ptx_twins.py), never edited by
hand.

    python -m numgemm.ptx_twins          rewrite the twins from their sources
"""

import re
import sys
from dataclasses import dataclass

from .toolchain import PTX_DIR


@dataclass(frozen=True)
class Twin:
    """One twinned file: which routines of which source, and how they change."""

    target: str             # the file written
    source: str             # the file read
    routines: str           # regex of the source's routines that have the form
    types: tuple            # (old, new, ...) operand types, a twin of each routine for each new one
    acc: str = ""           # the source's accumulator type, where the twins' is f32 instead
    directives: str = ""    # .version and .target where the form needs newer ones than the source's
    note: str = ""          # where the form runs natively, for the generated headers

    @property
    def renames_acc(self):
        return bool(self.acc)


TWINS = (
    Twin("mma_bf16.ptx", "mma.ptx", r"numgemm_mma_m16n8k\d+_f16_f32$", ("f16", "bf16")),
    Twin("wgmma_bf16.ptx", "wgmma.ptx", r"numgemm_wgmma_m64n\d+k16_f32_f16_f16(_tb|_rs)?$", ("f16", "bf16")),
    # FP8's mma.sync is sm_89's (PTX 8.4); sm_90 runs it by converting to f16 for HMMA
    Twin("mma_fp8.ptx", "mma.ptx", r"numgemm_mma_m16n8k32_s8_s32$", ("s8", "e4m3", "e5m2"), acc="s32",
         directives=".version 8.4\n.target sm_89\n.address_size 64\n",
         note="native on sm_89; sm_90 converts the operands to f16 for HMMA"),
    Twin("wgmma_fp8.ptx", "wgmma.ptx", r"numgemm_wgmma_m64n(16|128|256)k32_s32_s8_s8$", ("s8", "e4m3", "e5m2"),
         acc="s32"),
)

_FUNC = re.compile(r"((?:^//[^\n]*\n)*)^\.visible\s+\.func\s*(?:\([^)]*\))?\s*(\w+)\s*\(.*?^\}\n", re.M | re.S)
_SASS = re.compile(r"(SASS:\s*(?://\s*)?HG?MMA\.\S+?\.F32)\b")      # the opcode may open the next line


def twin_text(twin, text):
    """The twin file of its source's text."""
    head = re.match(r"(?:^//[^\n]*\n)*", text, re.M).group(0)
    directives = twin.directives or "".join(line + "\n" for line in text.splitlines()
                                            if line.startswith((".version", ".target", ".address_size")))
    new = ", ".join(twin.types[1:])
    out = [f"// numgemm: {twin.target}, written by numgemm/ptx_twins.py from {twin.source}: its routines with\n"
           f"// {new} operands ({'and f32 sums ' if twin.renames_acc else ''}in the same fragments, registers "
           "and descriptors;\n// `python -m numgemm.ptx_twins` rewrites it). What follows is the source's header.\n"
           "//\n", head, directives]
    for m in _FUNC.finditer(text):
        if re.match(twin.routines, m.group(2)):
            for typ in twin.types[1:]:
                out.append("\n" + (_float8(twin, typ, m) if twin.renames_acc else _bf16(m.group(0))))
    return "".join(out)


def _bf16(routine):
    """One routine with bf16 operands: its name, instruction, comments and SASS opcode."""
    routine = _SASS.sub(r"\1.BF16", routine)
    return re.sub(r"\bf16\b|(?<=_)f16(?=_|\()|(?<=\.)f16(?=\.|\s)", "bf16", routine)


def _float8(twin, typ, m):
    """One routine with FP8 operands of type typ and f32 sums: its name, instruction,
    registers and (wgmma) the imm-scale operands; a header of its own that names
    the source routine, whose comments describe the fragments."""
    old, acc = twin.types[0], twin.acc
    code = m.group(0)[len(m.group(1)):]
    code = re.sub(rf"_{old}(?=_|\()", f"_{typ}", code).replace(f"_{acc}_", "_f32_").replace(f"_{acc}(", "_f32(")
    code = re.sub(rf"\.{acc}\b", ".f32", re.sub(rf"\.{old}\b", f".{typ}", code))
    code = code.replace("%a, %b, %p;", "%a, %b, %p, 1, 1;")        # wgmma: imm-scale-a, imm-scale-b
    instruction = re.search(r"^\s*((?:wgmma\.mma_async|mma)\.\S+)", code, re.M).group(1)
    shape = re.search(r"\.m(\d+)n(\d+)k(\d+)", instruction).groups()
    sass = (f"QGMMA.{shape[0]}x{shape[1]}x{shape[2]}" if instruction.startswith("wgmma") else
            f"QMMA.{''.join(shape)}") + f".F32.{typ.upper()}.{typ.upper()}"
    header = (f"// {instruction}: {m.group(2)}\n// ({twin.source}: its fragments and descriptors) "
              f"with {typ} operands and f32 sums.\n// SASS: {sass}" + (f"; {twin.note}" if twin.note else "") + "\n")
    return header + code


def twins():
    """{twin path: its text} from the sources in ptx_asm/."""
    return {PTX_DIR / t.target: twin_text(t, (PTX_DIR / t.source).read_text()) for t in TWINS}


def main():
    for path, text in twins().items():
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
