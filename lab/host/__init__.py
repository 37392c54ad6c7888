"""Models of the lab's development host: the pace probes that measure its drifting CPU speed
(:mod:`lab.host.pace_probes`), the governor that holds the simulated devices to a constant
compute pace (:mod:`lab.host.pace_governor`), and the device watcher that attaches both to
ralp's simulated devices (:mod:`lab.host.pace_watcher`, named by ``$RALP_DEVICE_WATCHER``).
"""
