"""The text `decide deploy` copies into launch scripts, manifests and README commands.

A model path, a served model name or an image given on the command line (or by a script or an
agent that passes along what it was given) ends up in a shell script that someone runs on a
cluster. Every emitter quotes it (`shlex.quote`, or YAML's own quoting), and this module
refuses, before anything is decided or written, what no quoting makes safe: control, bidi and
line-separator characters (a newline ends a comment or a command; an escape rewrites a
terminal), text that is not valid UTF-8, a leading '-' (the engine would read it as a flag)
and values longer than any real path or name. Images follow the OCI reference grammar, an
allow-list; the generated Kubernetes object names are checked as DNS-1035 labels.
"""

from __future__ import annotations

import re

from disagg_decider.errors import UserError, excerpt
from disagg_decider.workload import unsafe_char

MAX_MODEL_PATH_CHARS = 4096  # PATH_MAX on Linux
MAX_SERVED_NAME_CHARS = 256
MAX_IMAGE_CHARS = 512

# OCI distribution reference: [registry[:port]/]path[:tag][@digest], lowercase path components
# joined by '.', '_', '__' or dashes (distribution/reference's grammar, without IPv6 hosts).
_DOMAIN = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(
    rf"(?:{_DOMAIN}(?::[0-9]{{1,5}})?/)?{_PATH_PART}(?:/{_PATH_PART})*(?::{_TAG})?(?:@{_DIGEST})?"
)
# A Service name must be a DNS-1035 label (a letter first); every object name the emitters make
# is the prefix plus a role suffix, so the prefix is held to the stricter rule and 40 characters.
DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
MAX_K8S_PREFIX_CHARS = 40


def check_text(flag: str, value: str, max_chars: int, what: str) -> None:
    """Refuse a value no quoting makes safe in a shell script, a manifest or a README."""
    if not value.strip():
        raise UserError(f"{flag} is empty; give {what}")
    if len(value) > max_chars:
        raise UserError(f"{flag} {excerpt(value)}: longer than {max_chars:,} characters")
    if (ch := unsafe_char(value)) is not None:
        raise UserError(
            f"{flag} {excerpt(value)}: contains the control, bidi or line-separator character "
            f"U+{ord(ch):04X}; launch scripts and manifests take one line of plain text"
        )
    if any("\ud800" <= c <= "\udfff" for c in value):
        raise UserError(f"{flag} {excerpt(value)}: is not valid UTF-8 text")
    if value != value.strip():
        raise UserError(f"{flag} {excerpt(value)}: starts or ends with a space")
    if value.startswith("-"):
        raise UserError(
            f"{flag} {excerpt(value)}: starts with '-', which the engine would read as a flag; "
            f"give {what}"
        )


def check_image(image: str) -> None:
    check_text(
        "--image", image, MAX_IMAGE_CHARS, "a container image such as vllm/vllm-openai:v0.18.2"
    )
    if not IMAGE_REFERENCE.fullmatch(image):
        raise UserError(
            f"--image {excerpt(image)}: not a container image reference; expected "
            "[REGISTRY[:PORT]/]NAME[:TAG][@DIGEST] with a lowercase NAME of letters, digits and "
            "'.', '_', '-' separators, e.g. vllm/vllm-openai:v0.18.2 or "
            "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.0.0"
        )


def check_deploy_text(
    model_path: str | None, served_model_name: str | None, image: str | None
) -> None:
    """The text options of `decide deploy`, each refused with its flag named."""
    if model_path is not None:
        check_text(
            "--model-path",
            model_path,
            MAX_MODEL_PATH_CHARS,
            "a Hugging Face repo (org/name) or a local path",
        )
    if served_model_name is not None:
        check_text(
            "--served-model-name",
            served_model_name,
            MAX_SERVED_NAME_CHARS,
            "the model name clients send, e.g. llama-3.1-8b",
        )
    if image is not None:
        check_image(image)


def check_k8s_prefix(name: str, source: str) -> None:
    """The prefix every Kubernetes object name starts with: a DNS-1035 label of at most 40
    characters, so that `<prefix>-<role>-scaler` stays a valid 63-character name."""
    if len(name) > MAX_K8S_PREFIX_CHARS or not DNS_1035_LABEL.fullmatch(name):
        raise UserError(
            f"{source} {excerpt(name)}: not a Kubernetes name prefix (DNS-1035 label: lowercase "
            f"letters, digits and '-', a letter first, a letter or digit last, at most "
            f"{MAX_K8S_PREFIX_CHARS} characters)"
        )


def k8s_name(text: str) -> str:
    """A DNS-1035 label prefix (a letter first, as Service names need), short enough to take
    suffixes such as '-prefill-scaler'."""
    slug = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    if slug[:1].isdigit():
        slug = f"llm-{slug}"
    slug = re.sub(r"-{2,}", "-", slug)[:MAX_K8S_PREFIX_CHARS].strip("-")
    return slug or "llm"
