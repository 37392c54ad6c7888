"""The plan for a mode: mode "ralp" places layers or refuses (a model with nothing to offload
would train plain PS under RALP's name); mode "skewness" falls back to plain PS with a warning,
as the paper's rule says."""

import keras
import pytest

from ralp.placement.choose import NothingToOffloadError, check_placeable, choose_plan
from ralp.placement.plan import Plan
from tests.placement.test_plan import vgg_like


def all_conv():
    """Convolutions to the classes, then a global pooling: no dense layer after the last
    convolution, so nothing RALP could move to the PS."""
    x = inp = keras.Input((8, 8, 3), name="images")
    x = keras.layers.Conv2D(8, 3, name="c1")(x)
    x = keras.layers.Conv2D(10, 3, name="c2")(x)
    x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
    return keras.Model(inp, x, name="all_conv")


def test_mode_ralp_refuses_a_model_with_nothing_to_offload_and_says_what_to_do():
    with pytest.raises(NothingToOffloadError, match="'all_conv' has none.*mode 'ps'.*mode 'auto'"):
        choose_plan(all_conv(), "ralp", workers=2, num_ps=1)
    with pytest.raises(NothingToOffloadError, match="follows the last convolution"):
        check_placeable(all_conv(), "ralp")


def test_mode_ralp_refuses_a_plan_that_offloads_nothing():
    model = vgg_like()
    empty = Plan.offloading([layer.name for layer in model.layers], [])
    with pytest.raises(NothingToOffloadError, match="the plan given offloads no layer"):
        choose_plan(model, "ralp", workers=2, num_ps=1, plan=empty)
    with pytest.raises(NothingToOffloadError, match="the plan given offloads no layer"):
        check_placeable(model, "ralp", empty)


def test_skewness_falls_back_to_plain_ps_with_a_warning_and_ps_is_plain():
    choice = choose_plan(all_conv(), "skewness", workers=2, num_ps=1)
    assert choice.plan.is_empty and "plain PS" in choice.warning
    assert choose_plan(all_conv(), "ps", workers=2, num_ps=1).plan.is_empty
    check_placeable(all_conv(), "skewness")  # the rule decides later, with the cluster
    check_placeable(all_conv())


def test_mode_ralp_places_a_model_with_a_split_even_where_the_rule_would_not():
    choice = choose_plan(vgg_like(), "ralp", workers=2, num_ps=1, threshold=-10.0)
    assert not choice.plan.is_empty and choice.warning is None


def test_wrap_refuses_mode_ralp_with_nothing_to_offload_before_connecting():
    """No server listens at the spec's ports: wrap must refuse before it probes them (were it
    to try, the probe would fail with a ClusterError after 2 s, before TensorFlow connects)."""
    import ralp
    from ralp.cluster.spec import local_spec

    with pytest.raises(ralp.PlanError, match="^mode 'ralp' needs layers to offload"):
        ralp.wrap(all_conv(), local_spec(workers=1, ps=1), mode="ralp",
                  failures=ralp.Failures(connect_timeout=2))
