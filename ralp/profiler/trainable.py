"""What ralp's trainers cannot take of a model, said in the same words wherever a model comes
in: ``ralp.wrap`` (as a ``TrainingSetupError``), the profiler's verdict, the planner (which
then writes no command) and the bench (before any run). The profiler still profiles such a
model as it is."""

from __future__ import annotations


def several_outputs(model) -> str | None:
    """Why ralp cannot train ``model`` if it has several outputs (ralp's trainers compute one
    loss on one output), else None."""
    return outputs_refusal(model.name, len(getattr(model, "outputs", None) or []))


def outputs_refusal(name: str, outputs: int) -> str | None:
    """:func:`several_outputs` of a model named ``name`` with ``outputs`` outputs."""
    if outputs < 2:
        return None
    return (f"model {name!r} has {outputs} outputs; ralp's trainers compute one loss on one "
            "output. Train a single-output model, e.g. keras.Model(model.inputs, "
            "model.outputs[0]) (ralp.profile still profiles the model as it is)")
