"""Synthetic sessions for the fault tests (no sample files needed)."""

from __future__ import annotations

from typing import Any

CONSTRAINT = "先不要修改部署脚本。Do not modify the deploy script."


def conversation(tag: str, turns: int) -> list[dict[str, Any]]:
    """A coding session of ``turns`` exchanges (about 95 tokens each); the user's constraint is in turn 1."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent working in the export-service repository."},
        {"role": "user", "content": f"[{tag}] The nightly export job times out; find out why and fix it."},
    ]
    for n in range(turns):
        ask = CONSTRAINT if n == 1 else f"[{tag}] Step {n}: check fetch_batch and the statement timeout again."
        messages += [
            {"role": "user", "content": ask},
            {
                "role": "assistant",
                "content": f"[{tag}] Step {n}: fetch_batch reads 5000 rows per query and the statement timeout "
                "is 30 s; the slow part is the join on orders. Lowering the batch size to 500 keeps each "
                f"query under 4 s in the dry run (run {n}).",
            },
        ]
    return messages
