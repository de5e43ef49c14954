"""The CPU kernel pins: set where unset, the user's own values kept."""

from paravg.cpu_kernels import PINNED_AVX2, pin_cpu_kernels


def test_pins_are_set_where_unset_and_a_users_value_wins():
    env = {"MKL_CBWR": "COMPATIBLE", "PATH": "/bin"}
    assert pin_cpu_kernels(env) == {**PINNED_AVX2, "MKL_CBWR": "COMPATIBLE"}
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert env["MKL_CBWR"] == "COMPATIBLE" and env["PATH"] == "/bin"
