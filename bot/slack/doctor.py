"""`/cluster doctor`'s answer: each org passed or its failing checks with their fixes (bot.iam.doctor's report)."""

from __future__ import annotations

from bot.iam.doctor import PROGRAM, DoctorReport
from bot.slack.blocks import Block, Reply, context, escape, section, sections


def doctor_reply(report: DoctorReport) -> Reply:
    lines: list[str] = []
    for org in report.orgs:
        who = "Program" if org.org_id == PROGRAM else f"`{org.org_id}`"
        if org.ok:
            passed = sum(1 for check in org.checks if check.status.value == "OK")
            lines.append(f":white_check_mark: {who}: {passed} checks passed")
            continue
        lines.append(f":x: {who}: {len(org.problems)} problem{'s' if len(org.problems) != 1 else ''}")
        lines += [f"    • *{escape(check.name)}*: {escape(check.detail)}" for check in org.problems]
    failing = [org.org_id for org in report.orgs if not org.ok]
    checked = sum(1 for org in report.orgs if org.org_id != PROGRAM)
    verdict = "every check passed" if not failing else f"{len(failing)} with problems"
    summary = f"Doctor: {checked} org{'s' if checked != 1 else ''} checked in {report.seconds:.1f} s, {verdict}."
    blocks: list[Block] = [section(f"*{summary}*"), *sections(lines)[:45]]
    blocks.append(
        context("All of an org's lines: `pitcrew doctor --org ORG`. The Home shows orgs whose last run failed.")
    )
    text = summary + "\n" + "\n".join(line.replace("    • ", "- ") for line in lines)
    return Reply(text=text[:3900], blocks=blocks)
