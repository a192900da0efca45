"""Number formats of weights and KV cache: their bytes per element, block scales included.

A model's weights may be in one format or two: mixture-of-experts checkpoints often quantize
the routed experts harder than attention and the dense layers (gpt-oss-120b: MXFP4 experts,
BF16 everything else). A *precision* is a string naming both: `"fp8"` for one format
throughout, `"mxfp4-experts/bf16"` for experts in one and the rest in another. It stays a plain
string so engines, caches and messages keep handling it as they handled a single dtype.

No numpy here: the workload schema and the catalog import it.
"""

from __future__ import annotations

from typing import Literal

Dtype = Literal["bf16", "fp8", "fp8_block", "mxfp4", "nvfp4", "fp4"]
DTYPES: tuple[str, ...] = Dtype.__args__  # type: ignore[attr-defined]

# Bytes per element, scales included.
BYTES_PER_ELEMENT: dict[str, float] = {
    # bf16 / fp16: 16 bits.
    "bf16": 2.0,
    # FP8 E4M3 with one FP32 scale per tensor (or per channel): the scales are a few KB per
    # matrix, nothing against its millions of weights.
    "fp8": 1.0,
    # FP8 with one FP32 scale per 128 x 128 block (DeepSeek-V3's `weight_block_size`):
    # 1 + 4 / 16,384 bytes.
    "fp8_block": 1.0 + 4.0 / (128 * 128),
    # OCP MXFP4: 4-bit E2M1 elements and one 8-bit E8M0 scale per 32: 4.25 bits.
    "mxfp4": (32 * 4 + 8) / 32 / 8,
    # NVFP4: 4-bit E2M1 elements and one FP8 E4M3 scale per 16 (plus one FP32 per tensor,
    # negligible): 4.5 bits.
    "nvfp4": (16 * 4 + 8) / 16 / 8,
    # `fp4` is NVFP4, the format FP4 tensor cores (Blackwell) and TensorRT-LLM run.
    "fp4": (16 * 4 + 8) / 16 / 8,
}

SOURCES: dict[str, str] = {
    "fp8_block": "https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json "
    "(quantization_config.weight_block_size [128, 128]); arXiv 2412.19437 section 3.3",
    "mxfp4": "OCP Microscaling Formats (MX) v1.0 specification, "
    "https://www.opencompute.org/documents/ocp-microscaling-formats-mx-v1-0-spec-final-pdf "
    "(block 32, E8M0 scale)",
    "nvfp4": "https://developer.nvidia.com/blog/"
    "introducing-nvfp4-for-efficient-and-accurate-low-precision-inference/ "
    "(block 16, E4M3 scale, FP32 per tensor)",
    "fp8": "FP8 E4M3 per-tensor scaling (NVIDIA Transformer Engine; vLLM fp8)",
}

# Formats whose GEMMs run on the FP8 (or FP4) tensor-core path where the GPU has one.
LOW_PRECISION = frozenset({"fp8", "fp8_block", "mxfp4", "nvfp4", "fp4"})
FOUR_BIT = frozenset({"mxfp4", "nvfp4", "fp4"})

_EXPERTS_SUFFIX = "-experts/"


def precision(dense: str, experts: str | None = None) -> str:
    """The precision string of weights with `dense` attention/dense layers and `experts`."""
    if experts is None or experts == dense:
        return dense
    return f"{experts}{_EXPERTS_SUFFIX}{dense}"


def parts(value: str) -> tuple[str, str]:
    """(dense, experts) formats of a precision string."""
    if _EXPERTS_SUFFIX in value:
        experts, dense = value.split(_EXPERTS_SUFFIX, 1)
        return dense, experts
    return value, value


def bytes_per_element(dtype: str) -> float:
    return BYTES_PER_ELEMENT[dtype]


def dense_bytes(value: str) -> float:
    """Bytes per attention/dense weight under a precision."""
    return BYTES_PER_ELEMENT[parts(value)[0]]


def expert_bytes(value: str) -> float:
    """Bytes per routed-expert weight under a precision."""
    return BYTES_PER_ELEMENT[parts(value)[1]]


def is_valid(value: str) -> bool:
    dense, experts = parts(value)
    return dense in BYTES_PER_ELEMENT and experts in BYTES_PER_ELEMENT


def describe(value: str) -> str:
    """For people: `mxfp4 experts, bf16 attention and dense layers` or just `fp8`."""
    dense, experts = parts(value)
    if dense == experts:
        return dense
    return f"{experts} experts, {dense} attention and dense layers"
