"""Mixed precision in training: the forward pass under autocast, and the loss scaling fp16 needs."""

from __future__ import annotations

from contextlib import nullcontext

import torch


def autocast(device: torch.device, precision: str):
    """Mixed precision for the forward pass: bf16 or fp16 autocast, or nothing for fp32."""
    if precision == "fp32":
        return nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def grad_scaler(device: torch.device, precision: str) -> torch.amp.GradScaler:
    """fp16 has 5 exponent bits: small gradients underflow to zero unless the loss is scaled up
    before backward (and the gradients down before the step). The scaler skips a step whose
    gradients overflowed and lowers the scale. A no-op for fp32 and bf16 (bf16 has fp32's range)."""
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16")
