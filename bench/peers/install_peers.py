"""Installs the Debian packages a benchmark compares with, the way the stages
of scripts/test install theirs: scripts/setup (the base packages: compilers,
CMake, OpenBLAS, numpy, ...), then its dimsum_install for the packages named,
which installs only the missing ones and waits for a busy package manager.
On a machine that has them all it only checks (dpkg -s), so the benchmarks
call it on every run."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# What bench/compare runs beside dimsum: PyTorch, Eigen, BLIS (its OpenMP
# build, whose headers bench/compare compiles against).
COMPARE = ["python3-torch", "libeigen3-dev", "libblis-dev", "libblis-openmp-dev"]
# What bench/scaling runs: dimsum under mpirun (Open MPI), PyTorch.
SCALING = ["python3-torch", "libopenmpi-dev", "openmpi-bin"]


def install(packages):
    """Runs scripts/setup and dimsum_install for `packages`; raises if apt fails."""
    subprocess.run(["bash", "-c", 'source scripts/setup && dimsum_install "$@"', "install_peers"] + list(packages),
                   cwd=ROOT, check=True)
