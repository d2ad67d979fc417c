# Sourced by the bench scripts whose references call OpenBLAS (PyTorch from
# Debian's python3-torch links it): OpenBLAS picks its kernels from the
# CPU's model number, and Debian's 0.3.21 takes CPUs it does not know
# (virtual ones among them) for a Prescott (SSE3), 4-5x slower than its
# AVX-512 kernels. Unless OPENBLAS_CORETYPE is set already, it is asked for
# the kernels the host's vector units run (as bench/jit.cpp does): SkylakeX
# with AVX-512, Haswell with AVX2 and FMA.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=Haswell
  fi
fi
