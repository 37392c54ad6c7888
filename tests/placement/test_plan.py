"""The placement plan: from the profiler, overrides by regex, JSON round trip, errors."""

import keras
import pytest
from keras import layers

import ralp
from ralp.placement.plan import Plan, PlanError, ps_device

LAYERS = ("images", "conv1", "pool1", "flatten", "fc6", "drop6", "fc7", "drop7", "logits")


def profiled(ps=1, threshold=10.0):
    # The plan is under test, not the skewness rule: a lax K makes the toy model eligible.
    return ralp.profile(vgg_like(), 8, ps=ps, threshold=threshold)


def vgg_like():
    x = inp = keras.Input((16, 16, 3), name="images")
    x = layers.Conv2D(8, 3, padding="same", name="conv1")(x)
    x = layers.MaxPooling2D(2, name="pool1")(x)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(256, activation="relu", name="fc6")(x)
    x = layers.Dropout(0.5, name="drop6")(x)
    x = layers.Dense(64, activation="relu", name="fc7")(x)
    x = layers.Dropout(0.5, name="drop7")(x)
    x = layers.Dense(10, name="logits")(x)
    return keras.Model(inp, x, name="vgg_like")


def test_from_profile_offloads_everything_after_the_split():
    plan = Plan.from_profile(profiled(ps=1))
    assert plan.layers == LAYERS
    assert plan.split_after == "pool1"
    assert list(plan.offloaded) == ["flatten", "fc6", "drop6", "fc7", "drop7", "logits"]
    assert set(plan.offloaded.values()) == {0}
    assert plan.kept == ("images", "conv1", "pool1")
    assert plan.device_of("fc6") == "/job:ps/replica:0/task:0/device:CPU:0"
    assert plan.device_of("fc6", "gpu") == "/job:ps/replica:0/task:0/device:GPU:0"
    assert plan.device_of("conv1") is None


def test_two_ps_tasks_split_layers_whole_by_bytes():
    plan = Plan.from_profile(profiled(ps=2))
    # fc6 (4096*256 weights) dwarfs fc7 + logits: it gets a task of its own.
    assert plan.task_of("fc6") != plan.task_of("fc7")
    assert plan.task_of("fc7") == plan.task_of("logits")
    assert plan.task_of("flatten") == plan.task_of("fc6")  # parameter-free layers follow


def test_ineligible_model_gives_an_empty_plan():
    p = profiled(threshold=-10.0)
    plan = Plan.from_profile(p)
    assert plan.is_empty and plan.offloaded == {} and "not eligible" in plan.note
    assert "plain PS" in str(plan)


def test_override_by_fullmatch_regex():
    plan = Plan.from_profile(profiled(ps=2))
    moved = plan.override({"fc[67]": 1, "logits": "worker", "drop.*": None})
    assert moved.task_of("fc6") == moved.task_of("fc7") == 1
    assert moved.task_of("logits") is None and moved.task_of("drop6") is None
    assert moved.source == "override"
    assert plan.task_of("logits") is not None  # the original is unchanged


@pytest.mark.parametrize(
    "rules, message",
    [
        ({"fc": 0}, "matches no layer"),  # fullmatch: "fc" is not "fc6"
        ({"fc.*": 0, "fc6": 0}, "matched by both"),
        ({"fc6": 2}, "out of range"),
        ({"fc6": "ps"}, "target must be"),
        ({"fc[": 0}, "bad layer pattern"),
    ],
)
def test_bad_overrides(rules, message):
    plan = Plan.from_profile(profiled(ps=2))
    with pytest.raises(PlanError, match=message):
        plan.override(rules)


def test_json_round_trip(tmp_path):
    plan = Plan.from_profile(profiled(ps=2)).override({"logits": 0})
    path = tmp_path / "plan.json"
    plan.save(path)
    again = Plan.load(path)
    assert again.layers == plan.layers and again.offloaded == plan.offloaded
    assert again.num_ps == 2 and again.source == "json"
    assert '"place": "ps:0"' in path.read_text()


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", "not valid JSON"),
        ("[]", "JSON object"),
        ('{"format": 99}', "unsupported plan format"),
        ('{"format": 1, "num_ps": 1}', "missing or malformed"),
        (
            '{"format": 1, "num_ps": 1, "layers": [{"name": "a", "place": "gpu:0"}]}',
            "place must be",
        ),
        ('{"format": 1, "num_ps": 1, "layers": [{"name": "a", "place": "ps:3"}]}', "out of range"),
    ],
)
def test_bad_plan_files(text, message):
    with pytest.raises(PlanError, match=message):
        Plan.from_json(text)


def test_missing_layers_are_errors(tmp_path):
    with pytest.raises(PlanError, match="no such layers"):
        Plan.offloading(LAYERS, ["fc6", "fc9"])
    plan = Plan.offloading(LAYERS, ["fc6", "logits"], 1, model_name="vgg_like")
    with pytest.raises(PlanError, match="does not have: \\['logits'\\]"):
        plan.check_model(["conv1", "fc6"])
    with pytest.raises(PlanError, match="cannot read plan"):
        Plan.load(tmp_path / "missing.json")


def test_readable_string():
    text = str(Plan.offloading(LAYERS, ["fc6", "fc7", "logits"], 1, model_name="vgg_like"))
    assert "3 layer(s) offloaded" in text and ps_device(0) in text and "fc6, fc7, logits" in text


def test_a_stanza_plan_names_the_conv_and_fc_ranks_not_ps_tasks():
    from ralp.placement.plan import StanzaPlan

    placed = Plan.from_profile(profiled(ps=1))
    plan = StanzaPlan.of(placed, [(0, 1), (2,)])  # 3 CONV ranks, FC ranks 3 and 4
    text = str(plan)
    assert "PS task" not in text and "/job:ps" not in text, text
    assert text.startswith("Stanza plan for 'vgg_like': 3 CONV rank(s), 2 FC rank(s); "
                           "6 layer(s) on the FC ranks after 'pool1'"), text
    assert "CONV ranks 0-2: 3 layers (images..pool1), their gradients allreduced" in text
    assert "FC ranks 3-4: flatten, fc6, drop6, fc7, drop7, logits (a replica on each" in text
    assert "FC rank 3 <- CONV ranks 0-1" in text and "FC rank 4 <- CONV rank 2:" in text
    one = str(StanzaPlan.of(placed, [(0,)]))
    assert "CONV rank 0: 3 layers (images..pool1)\n" in one and "FC rank 1 <- CONV rank 0" in one
    # the placement is the same plan: JSON, and another mode's plan, without the ranks
    assert plan.to_json() == placed.to_json()
    assert type(plan.plain()) is Plan and plan.plain() == placed and ps_device(0) in str(plan.plain())


def test_a_stanza_trainers_plan_places_mode_ralp():
    from ralp.placement.choose import choose_plan
    from ralp.placement.plan import StanzaPlan

    placed = Plan.from_profile(profiled(ps=1))
    choice = choose_plan(vgg_like(), "ralp", workers=2, num_ps=1,
                         plan=StanzaPlan.of(placed, [(0,)]))
    assert type(choice.plan) is Plan and choice.plan == placed
