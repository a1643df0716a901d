"""Offline builds and their SASS: compile a Numba kernel, with the code it
links, for a chosen target on a machine without a GPU, and read its
instructions, loops and resources.

numba-cuda's dispatcher compiles only for the GPU it runs on; build() runs
the same pipeline (Numba -> NVVM LTO-IR, NVRTC for .cu, nvJitLink for the
link, nvdisasm / cuobjdump for reading) with the target given instead.
numgemm.inspect is the command line over it.
"""

import hashlib
import re
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import SimpleNamespace

from numba import types
from numba.cuda import dispatcher
from numba.cuda.compiler import compile_cuda, kernel_fixup
from numba.cuda.cudadrv import nvvm

from .toolchain import arch_suffix, parse_target, quick_front_end, run_tool, target_name

_INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:\{\s*)?(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*(?:x[0-9x.A-Z]*)?)")
_MANGLED = re.compile(r"_Z[\w$]+")
_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_BRANCH = re.compile(r"\bBRA\s+`\((\.L_x_\d+)\)")
# The class of an instruction, by its base opcode (uniform-datapath U* forms
# count with their vector forms): what --sass tabulates.
CLASSES = {
    "tensor": ("HMMA", "IMMA", "QMMA", "HGMMA", "IGMMA", "QGMMA", "DMMA", "BMMA"),
    "ldmatrix": ("LDSM",),
    "async copy": ("LDGSTS", "LDGDEPBAR", "UTMALDG", "UBLKCP", "UTMACCTL"),
    "global ld": ("LDG",), "global st": ("STG", "RED", "ATOMG"),
    "shared ld": ("LDS",), "shared st": ("STS",),
    "local (spills)": ("LDL", "STL"),
    "barrier": ("BAR", "DEPBAR", "SYNCS", "MEMBAR", "WARPSYNC", "ERRBAR", "CCTL"),
    "int ALU": ("IADD3", "IMAD", "LEA", "LOP3", "SHF", "ISETP", "IABS", "IMNMX", "SEL", "PRMT", "POPC", "FLO",
                "BMSK", "BREV", "IDP", "IADD", "IMUL", "ISCADD", "LOP", "SGXT", "PLOP3", "VIADD", "VIMNMX"),
    "float ALU": ("FADD", "FMUL", "FFMA", "FSETP", "FMNMX", "FSEL", "MUFU", "FCHK", "HADD2", "HMUL2", "HFMA2",
                  "HSETP2", "HMNMX2", "DADD", "DMUL", "DFMA"),
    "conversion": ("F2I", "I2F", "F2F", "I2I", "F2FP", "I2FP", "FRND"),
    "control": ("BRA", "EXIT", "CALL", "RET", "BSYNC", "BSSY", "JMP", "BREAK", "KILL", "BPT", "YIELD", "NOP",
                "ACQBULK", "ELECT"),
}
_CLASS_OF = {op: c for c, ops in CLASSES.items() for op in ops}
# One letter per instruction in a loop's shape: tensor-core mma (CLASSES'
# tensor opcodes: mma.sync, wgmma), ldmatrix, global -> shared copy (cp.async,
# TMA) or global load, barrier, mbarrier wait; "." for everything else.
_SHAPE = tuple((op, "M") for op in CLASSES["tensor"]) + (
    ("LDSM", "L"), ("LDGSTS", "G"), ("LDGDEPBAR", "."), ("LDG", "G"), ("UTMALDG", "G"), ("BAR.SYNC", "B"),
    ("SYNCS.PHASECHK", "W"))


def instruction_class(op):
    """The class (CLASSES) of an opcode with modifiers ('IMMA.16832.S8.S8'); "other"
    for moves, special registers, constants, shuffles and votes."""
    base = op.split(".")[0]
    if base not in _CLASS_OF and base.startswith("U") and base[1:] in _CLASS_OF:
        base = base[1:]
    return _CLASS_OF.get(base, "other")


@dataclass
class Loop:
    """A loop of the SASS (a backward branch and its target): its opcodes,
    and where it starts and ends (indices of the function's instructions)."""

    ops: list
    span: tuple

    @cached_property
    def shape(self):
        """The loop as letters (see _SHAPE): where the mmas, ldmatrix, copies
        and barriers fall. mmas, longest_gap and summary all read it."""
        return "".join(next((c for p, c in _SHAPE if op.startswith(p)), ".") for op in self.ops)

    @property
    def mmas(self):
        return self.shape.count("M")

    @property
    def per_mma(self):
        """Instructions of the loop per tensor-core instruction in it."""
        return len(self.ops) / self.mmas if self.mmas else float("inf")

    @property
    def longest_gap(self):
        """The most instructions in a row without an mma: where a warp gives
        the tensor pipe nothing, and only other warps can."""
        return max(len(run) for run in self.shape.split("M"))

    def summary(self):
        shape = self.shape
        return (f"main loop: {len(self.ops)} instructions (mma {self.mmas}, ldmatrix {shape.count('L')}, "
                f"global loads {shape.count('G')}, bar.sync {shape.count('B')}, mbarrier waits {shape.count('W')}); "
                f"longest stretch without an mma: {self.longest_gap}")


@dataclass
class Build:
    """A kernel built for one target: its cubin, SASS and resource usage."""

    name: str
    target: str
    cubin: bytes
    seconds: float                  # compile + link, wall clock
    sass: str = field(repr=False)
    registers: int
    shared_bytes: int               # static shared memory
    local_bytes: int                # stack frame + local memory per thread: spills land here
    cached: bool = False            # read from numgemm's kernel cache (seconds: the original build's)
    built_with: tuple = ()          # the other targets its front end was built with (build_many)

    @property
    def digest(self):
        """SHA-256 of the SASS with the mangled function names blanked: they
        carry the defining module's path and a closure's id, which differ
        between builds of the same code."""
        return hashlib.sha256(_MANGLED.sub("_Z", self.sass).encode()).hexdigest()

    @property
    def instructions(self):
        """Opcodes with their modifiers, in program order ('IMMA.16832.S8.S8')."""
        return [m.group(1) for m in map(_INSTR.match, self.sass.splitlines()) if m]

    def histogram(self, depth=None):
        """Counter of opcodes; depth=1 keeps only the base opcode ('IMMA')."""
        ops = self.instructions
        if depth:
            ops = [".".join(op.split(".")[:depth]) for op in ops]
        return Counter(ops)

    def classes(self):
        """Counter of instruction classes (CLASSES)."""
        return Counter(map(instruction_class, self.instructions))

    def count(self, prefix):
        """How many instructions start with prefix ('IMMA.16832', 'LDL')."""
        return sum(op.startswith(prefix) for op in self.instructions)

    @property
    def calls(self):
        """Calls of functions. ptxas also writes `CALL.REL.NOINC` to a local
        label (.L_x_n) as a branch idiom; those are control flow, not calls."""
        return sum(1 for line in self.sass.splitlines()
                   if _INSTR.match(line) and " CALL" in line and "`(.L_" not in line)

    @property
    def loops(self):
        """Every loop: the instructions from a backward branch's target to the branch."""
        lines, labels, pending = [], {}, []
        for line in self.sass.splitlines():
            if (label := _LABEL.match(line)):
                pending.append(label.group(1))
            elif (m := _INSTR.match(line)):
                labels.update((p, len(lines)) for p in pending)
                pending = []
                lines.append((m.group(1), line))
        loops = []
        for end, (_, line) in enumerate(lines):
            branch = _BRANCH.search(line)
            # An unconditional jump back is a wait's retry stub returning (ptxas puts an
            # mbarrier wait's spin after the function's end), not a loop.
            if branch and labels.get(branch.group(1), end + 1) <= end and "@" in line[:branch.start()]:
                start = labels[branch.group(1)]
                loops.append(Loop([op for op, _ in lines[start:end + 1]], (start, end)))
        return loops

    @property
    def k_loops(self):
        """The loops with mma instructions and no such loop inside them (a
        persistent kernel's tile loop holds its k loops)."""
        loops = [lp for lp in self.loops if lp.mmas]
        return [lp for lp in loops if not any(o is not lp and lp.span[0] <= o.span[0] and o.span[1] <= lp.span[1]
                                              for o in loops)]

    def main_loop(self):
        """A GEMM's k loop: of the k loops, the one with the most mma
        instructions (a tile loop that peels the first k-tile has more
        around it); None without one."""
        inner = self.k_loops
        return min(inner, key=lambda lp: (-lp.mmas, len(lp.ops))) if inner else None

    def summary(self):
        return (f"{self.name} [{self.target}]: {self.registers} registers, "
                f"{self.shared_bytes} B static shared, {self.local_bytes} B local/thread, "
                f"{len(self.instructions)} instructions, "
                + ("from the cache (" if self.cached else "") + f"built in {self.seconds:.2f} s"
                + (f", one front end with {', '.join(self.built_with)}" if self.built_with else "")
                + (")" if self.cached else ""))


#: NVVM's options for every numgemm build (offline and for the GPU alike).
NVVM_OPTIONS = {"fastmath": False, "opt": 3}


@contextmanager
def _callees_for(cc):
    """numba-cuda compiles a called device function (one it does not inline
    at the IR level: numgemm.kernel.regs.device) for the compute capability
    of the current GPU, so an offline build would need one. The function's
    LLVM IR does not depend on it (see front_end); here it is cc, no GPU asked."""
    current = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: SimpleNamespace(compute_capability=cc)
    try:
        yield
    finally:
        dispatcher.get_current_device = current


def front_end(pyfunc, argtypes, cc=(8, 0), *, max_registers=None, launch_bounds=None, lto=True):
    """Numba's part of a build: (code library, entry name). The library's LLVM
    IR does not depend on the target for cc >= 6.0 (numba-cuda reads the
    compute capability only for atomics and some math), so one front end
    serves every target: library_cubin(lib, target) links it for each."""
    pyfunc = getattr(pyfunc, "py_func", pyfunc)
    with _callees_for(tuple(cc)[:2]), quick_front_end():
        cres = compile_cuda(pyfunc, types.void, tuple(argtypes), cc=tuple(cc)[:2], lto=lto,
                            max_registers=max_registers, nvvm_options=dict(NVVM_OPTIONS))
    lib, entry = cres.library, cres.fndesc.llvm_func_name
    kernel = lib.get_function(entry)
    lib._entry_name = entry
    kernel_fixup(kernel, False)
    nvvm.set_launch_bounds(kernel, launch_bounds)
    return lib, entry


def library_cubin(lib, target):
    """The library linked for target ('sm_89'; 'sm_90a': the arch-specific
    target that Hopper-only instructions need, as numba-cuda builds on sm_90),
    by an nvJitLink link that keeps ptxas's report (ptxas_losses reads it)."""
    with _verbose_links():
        return bytes(lib.get_cubin(cc=(*parse_target(target), arch_suffix(target))).code)


@contextmanager
def _verbose_links():
    """numba-cuda's cubin links with nvJitLink's -verbose: ptxas's report,
    its performance-loss notes among it, goes to the link's info log (the
    code is the same)."""
    from numba.cuda.cudadrv import driver

    options = driver._Linker._get_linker_options

    def verbose(linker, ptx):
        o = options(linker, ptx)
        o.verbose = not ptx
        return o
    driver._Linker._get_linker_options = verbose
    try:
        yield
    finally:
        driver._Linker._get_linker_options = options


def read_cubin(cubin, entry, name, target, seconds):
    """A Build of a cubin: its SASS (nvdisasm) and resources (cuobjdump)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        sass = run_tool("nvdisasm", "-c", str(path))
        usage = run_tool("cuobjdump", "--dump-resource-usage", str(path))
    res = _resources(usage, entry)
    return Build(name=name, target=target, cubin=cubin, seconds=seconds, sass=sass, registers=res["REG"],
                 shared_bytes=res["SHARED"], local_bytes=res["LOCAL"] + res["STACK"])


#: What ptxas says of code it had to make worse than written: wgmma serialised
#: or waited on where the kernel did not (C7509-C7517), setmaxnreg ignored
#: (C7504), and its warnings (register resources among them).
_PTXAS_LOSS = re.compile(r"\(C75(?:0[4-9]|1\d)\)|warning", re.I)


def ptxas_losses(lib, target):
    """The lines in which ptxas reports a performance loss or a warning in the
    link that made the library's cubin for target (library_cubin: links it
    first if it has not been)."""
    library_cubin(lib, target)
    report = lib.get_linkerinfo((*parse_target(target), arch_suffix(target))) or ""
    return [line.strip() for line in report.splitlines() if _PTXAS_LOSS.search(line)]


def refuse_ptxas_losses(lib, target, name):
    """Raise where ptxas reports a performance loss in the library for target."""
    losses = ptxas_losses(lib, target)
    if losses:
        raise RuntimeError(f"{name} [{target}]: ptxas made the code worse than written:\n  " + "\n  ".join(losses))


def build_many(pyfunc, argtypes, targets, *, name=None, max_registers=None, launch_bounds=None, lto=True,
               strict_ptxas=False):
    """{target: Build}: a kernel function (not a dispatcher) compiled once
    for argtypes and linked with its external code (.ptx, .cu) for each
    target, without a GPU. A Build's seconds are the front end's and its own
    link's (what building it alone would have taken). strict_ptxas: a
    performance loss ptxas reports (ptxas_losses) is a build error."""
    start = time.perf_counter()
    ccs = [parse_target(t) for t in targets]
    lib, entry = front_end(pyfunc, argtypes, min(ccs), max_registers=max_registers,
                           launch_bounds=launch_bounds, lto=lto)
    shared = time.perf_counter() - start
    builds = {}
    for target, cc in zip(targets, ccs):
        t0 = time.perf_counter()
        cubin = library_cubin(lib, target)
        if strict_ptxas:
            refuse_ptxas_losses(lib, target, name)
        b = read_cubin(cubin, entry, name or getattr(pyfunc, "__name__", "kernel"),
                       target_name(cc) + arch_suffix(target), shared + time.perf_counter() - t0)
        b.built_with = tuple(t for t in targets if t != target)
        builds[target] = b
    return builds


def build(pyfunc, argtypes, target="sm_89", **options):
    """Compile a kernel function (not a dispatcher) for argtypes and link it
    with its external code (.ptx, .cu) for target, without a GPU: a Build."""
    return build_many(pyfunc, argtypes, [target], **options)[target]


def _resources(usage, entry):
    # cuobjdump prints a "Function <name>:" line, then "REG:n STACK:n SHARED:n ..."
    blocks = re.split(r"^\s*Function ([^:\s]+):", usage, flags=re.M)
    for name, body in zip(blocks[1::2], blocks[2::2]):
        if name == entry:
            return {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", body)}
    raise RuntimeError(f"cuobjdump reported no resources for {entry}:\n{usage}")
