"""bot.names: what a name that matches nothing is answered with. Pure."""

from __future__ import annotations

from bot.names import did_you_mean, listing, shown, unknown_cluster, unknown_org

ORGS = ["kumo-labs", "sakura-ai", "fuji-ml"]


def test_a_near_miss_gets_one_suggestion_and_a_far_one_none() -> None:
    assert did_you_mean("kumo-lab", ORGS) == " Did you mean `kumo-labs`?"
    assert did_you_mean("KUMO-LABS", ORGS) == " Did you mean `kumo-labs`?"
    assert did_you_mean("kumo-p5", ["kumo-p5-train", "kumo-trn1"]) == " Did you mean `kumo-p5-train`?"
    assert did_you_mean("nosuch-org", ORGS) == ""
    assert did_you_mean("anything", []) == ""


def test_listing_is_readable_and_bounded() -> None:
    assert listing([]) == "none"
    assert listing(["a"]) == "`a`"
    assert listing(["a", "b", "c"]) == "`a`, `b` and `c`"
    assert listing([f"o{n}" for n in range(15)], limit=12).endswith("`o11` and 3 more")


def test_an_admin_is_told_the_org_does_not_exist_and_which_do() -> None:
    message = unknown_org("kumo-lab", ORGS, admin=True)
    assert message.startswith("There is no org `kumo-lab` in this program; the orgs are `kumo-labs`, ")
    assert message.endswith("Did you mean `kumo-labs`?")


def test_anyone_else_gets_the_same_words_for_any_org_they_cannot_see() -> None:
    mine = ["kumo-labs"]
    assert unknown_org("sakura-ai", mine, admin=False).replace("sakura-ai", "X") == unknown_org(
        "nosuch-xy", mine, admin=False
    ).replace("nosuch-xy", "X")
    assert "sakura" not in unknown_org("sakura-aj", mine, admin=False).replace("sakura-aj", "")
    assert unknown_org("x", [], admin=False) == "You have no access to org `x`."


def test_unknown_cluster_lists_only_what_it_is_given() -> None:
    message = unknown_cluster("kumo-p5", ["kumo-p5-train"], where="in `kumo-labs`")
    assert "`kumo-p5-train`" in message and "Did you mean `kumo-p5-train`?" in message
    assert "you can see none" in unknown_cluster("x", [])


def test_words_are_quoted_back_without_controls_mentions_or_backticks() -> None:
    quoted = shown("a\x00b\x7fc\u202ed`e<!channel>")
    assert "\x00" not in quoted and "\x7f" not in quoted and "\u202e" not in quoted and "`" not in quoted
    assert "<!channel>" not in quoted and "&lt;!channel&gt;" in quoted
    assert len(shown("y" * 500)) == 40
