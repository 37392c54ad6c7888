"""Made-up bench records for the report, records and plot tests."""

from ralp.bench.records import RECORD_KEYS


def record(**overrides) -> dict:
    """A complete, successful record (every schema key), with ``overrides`` applied."""
    r = {
        "model": "vgg19", "mode": "ps", "devices": 4, "workers": 3, "ps": 1,
        "backend": "netns", "bandwidth": "1gbit", "latency": None, "device_cpus": "auto",
        "job": None,
        "batch_size": 32, "image_size": 64, "num_classes": 10, "data": "synthetic",
        "sync": None, "slow_worker": None, "pull_schedule": "default",
        "steps": 20, "warmup": 3,
        "images_per_sec": 100.0, "images_per_sec_iqr": [97.5, 102.5],
        "step_time_s": 0.96, "step_time_iqr_s": [0.94, 0.98],
        "bytes_per_step_measured": 1.2e9, "bytes_per_step_predicted": 1.19e9,
        "bytes_ratio": 1.2e9 / 1.19e9,
        "ps_bytes_per_step_measured": 1.2e9, "ps_bytes_per_step_predicted": 1.19e9,
        "compute_step_time_s": 0.2, "wire_step_time_s": 0.7, "cpu_step_time_s": None,
        "bound_step_time_s": 0.7,
        "bound_ratio": 0.96 / 0.7,
        "sync_max_gap": None, "sync_waiting_s": None,
        "speedup_vs_ps": None, "speedup_vs_horovod": None, "host_kept_up": True,
        "reference_device": None, "device_pace": None, "dilation": None,
        "applied_bandwidth": None, "applied_latency": None, "device_pace_after": None,
        "pace_drift": None, "pace_held": None, "host_images_per_sec": None,
        "host_step_time_s": None, "error": None,
    }
    assert set(overrides) <= set(r) | {"scenario", "round", "cpu", "calibration",
                                 "busiest_cpu_task", "measured_steps"}, (
        set(overrides) - set(r))
    r.update(overrides)
    return r


def failed(**overrides) -> dict:
    numeric = {k: None for k in RECORD_KEYS if k.endswith(("_s", "_measured", "_predicted"))}
    numeric |= {"images_per_sec": None, "images_per_sec_iqr": None, "bytes_ratio": None,
                "bound_ratio": None}
    return record(**numeric | {"error": "worker 1 ran out of memory"} | overrides)


def local(**overrides) -> dict:
    """A local-backend record: no shaping and no byte counters."""
    none = {"bandwidth": None, "bytes_per_step_measured": None, "bytes_ratio": None,
            "ps_bytes_per_step_measured": None}
    return record(**{"backend": "local"} | none | overrides)
