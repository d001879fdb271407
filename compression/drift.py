"""Semantic drift checks: did the summary change what happened? (English and Chinese, no model)

Findings:

- ``constraint_dropped`` (high): a user constraint is in neither the prose nor the pinned facts;
- ``constraint_inverted`` (high): the prose states the constrained action without its negation as
  something requested, planned or done ("先不要修改 X" -> "用户要求修改 X"), even if the pinned facts
  still quote the constraint, or negates an approval;
- ``constraint_fabricated`` (medium): a prohibition or approval in the summary that no user gave;
- ``identifier_missing`` (medium/low): an identifier a user gave (path, ticket, train number, version, hash)
  is nowhere in the summary;
- ``identifier_fabricated`` (medium): an identifier in the summary that appears nowhere in the originals;
- ``hedge_lost`` (medium): "suspected missing dependency" became "missing dependency".

Matching is by key terms (words, crudely stemmed, and CJK character bigrams)
after removing the cue words (negations, hedges, request verbs), so a faithful
paraphrase matches its original and the presence or absence of a cue decides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .facts import (
    PINNED_HEADING,
    find_paths,
    is_approval,
    is_prohibition,
    pinned_facts_of,
    split_sentences,
    windowed,
)
from .messages import call_arguments, content_text
from .summary_message import is_summary_message, parse_summary_message

DRIFT_KINDS = (
    "constraint_dropped",
    "constraint_inverted",
    "constraint_fabricated",
    "identifier_missing",
    "identifier_fabricated",
    "hedge_lost",
)


@dataclass(frozen=True)
class DriftFinding:
    """One suspected drift, with quotes from both sides."""

    kind: str
    severity: str  # high | medium | low
    evidence: dict[str, str]  # {"original": ..., "summary": ...}
    source_index: int | None = None
    detail: str = ""
    #: where ``source_index`` points: "segment" (``original_messages``) or "context" (``context_messages``)
    scope: str = "segment"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "evidence": dict(self.evidence),
            "source_index": self.source_index,
            "detail": self.detail,
            "scope": self.scope,
        }


# ---------------------------------------------------------------- cues

_NEG_EN = re.compile(
    r"\b(?:not|no|never|none|nothing|don'?t|doesn'?t|didn'?t|won'?t|can'?t|cannot|mustn'?t|shouldn'?t|isn'?t"
    r"|aren'?t|avoid\w*|without|forb[ia]d\w*|prohibit\w*|ban(?:s|ned)?|refrain\w*|off-limits|untouched|unchanged"
    r"|read-only|hold\s+off|only|until|unless|pending|must|always|at\s+most|at\s+least|limit\w*|max(?:imum)?"
    r"|keep|leave|preserve|restrict\w*|disallow\w*|reject\w*|declin\w*)\b"
    r"|\bn't\b",
    re.I,
)
_NEG_ZH = re.compile(
    r"不(?!过|错|少|同|断|久|仅|但)|别(?![人的处名])|禁止|严禁|勿|未经|暂缓|暂不|没有|无需|不必|只能|只|仅|必须|务必|一定|"
    r"最多|至少|以内|上限|保持|维持|保留|原样|拒绝|否决|之前|等.{0,8}确认"
)
_REQUEST_CUES = (
    r"\b(?:asked|asks|ask|wants?|wanted|requested|requests?|instructed|told|should|will|plans?|planned|planning"
    r"|going\s+to|proceed\w*|approved|allowed|agreed|needs?\s+to|did|done|completed|let'?s|go\s+ahead|please|now)\b"
)
# actions reported as done are a request cue too, but they are content: never stripped from the terms
_DONE = r"\b(?:modified|changed|updated|edited|deleted|removed|ran|deployed|restarted|published|released)\b"
_REQUEST = re.compile(_REQUEST_CUES + "|" + _DONE, re.I)
_REQUEST_ZH = re.compile(r"要求|让|请|需要|应该|应当|计划|准备|打算|同意|批准|已经|已|了|将|要|开始|继续|执行|可以")
_HEDGE = re.compile(
    r"\b(?:maybe|might|may|suspect\w*|possibl[ey]|likely|probabl[ey]|perhaps|seems?|appears?|could\s+be|unclear"
    r"|unconfirmed|not\s+sure|uncertain|hypothes\w+|guess\w*)\b"
    r"|可能|也许|怀疑|疑似|似乎|大概|估计|不确定|或许|好像|看起来|推测|初步判断|待确认",
    re.I,
)
_ATTRIBUTION = re.compile(
    r"\b(?:the\s+)?(?:user|you|they|he|she|we|i)\b|用户|你|他|她|我们|我|要求|希望|说|表示|强调|提到|指出", re.I
)
_STRONG_ID = re.compile(
    r"\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b"  # ticket
    r"|\b[GDCZTKY]\d{2,4}\b"  # train
    r"|\bv\d+(?:\.\d+){1,3}\b|\b\d+\.\d+\.\d+\b"  # version
    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b",  # hash
    re.ASCII,
)

_STOP_WORDS = """the a an and or to of for in on at by is are was were be been it its this that these those with from as
    any anything all some user users you your they them we our i me my he she his her do does did under over
    into onto about just also so but if then there here has have had yet still"""
_STOP = frozenset(_STOP_WORDS.split())
_SYNONYMS = {
    "chang": "modify",
    "edit": "modify",
    "alter": "modify",
    "touch": "modify",
    "updat": "modify",
    "modifi": "modify",
    "remov": "delet",
    "drop": "delet",
    "execut": "run",
    "releas": "deploy",
    "ship": "deploy",
    "push": "deploy",
}
_CLAUSE = re.compile(r"[,，;；:：]|\s+-\s+|\binstead\b|\bbut\b|但是|而是|然后")
_CJK_STOP = frozenset("的了是在和把将也都就而及与或被给对从向到这那个些一再吧吗呢啊")
_EN_WORD = re.compile(r"[A-Za-z0-9_./-]+|[\u4e00-\u9fff]+")
_CUE_STRIP = re.compile(
    _NEG_EN.pattern + "|" + _REQUEST_CUES + "|" + _HEDGE.pattern + r"|\b(?:approv\w*|permission)\b",
    re.I,
)
_CUE_STRIP_ZH = re.compile(
    r"先不要|千万不要|千万别|不要|不许|不准|不能|不得|不可以|不允许|禁止|严禁|别|勿|未经|暂缓|暂不|暂时|没有|无需|不必|只能|只|仅|"
    r"必须|务必|一定|要求|让|请|需要|应该|应当|计划|准备|打算|同意|批准|已经|已|了|将|要|开始|继续|执行|可以|"
    r"可能|也许|怀疑|疑似|似乎|大概|估计|不确定|或许|好像|看起来|推测|用户|你|我们|我|他|她|先|再|记得|的|把|是|吗|呢|吧"
    r"|任何|所有|一切"
)

#: share of a statement's key terms a summary sentence must contain to be "about" it
MATCH = 0.5
#: stricter share used to call an un-negated sentence an inversion
INVERT_MATCH = 0.75
#: share of a hedged statement's terms a summary sentence must repeat to be "about" it
HEDGE_MATCH = 0.6


def _stem(word: str) -> str:
    for suffix in ("ing", "ied", "ies", "ed", "es", "s", "e"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)] + ("i" if suffix in ("ied", "ies") else "")
            if suffix in ("ing", "ed") and len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # running -> run, stopped -> stop
            break
    return _SYNONYMS.get(word, word)


def key_terms(text: str) -> set[str]:
    """Cue-free content terms of ``text``: stemmed English words, paths, CJK characters and bigrams.

    CJK counts by characters as well as bigrams, so word order changes ("删除日志" / "日志已删除")
    still match.
    """
    text = _CUE_STRIP.sub(" ", text)
    text = _CUE_STRIP_ZH.sub(" ", text)
    terms: set[str] = set()
    for token in _EN_WORD.findall(text):
        if token.isascii():
            token = token.lower().strip("./-")
            if len(token) < 2 or token in _STOP:
                continue
            terms.add(_stem(token))
            if "/" in token:  # a path also counts by its parts
                terms.update(_stem(p) for p in re.split(r"[/.]", token) if len(p) > 2 and p not in _STOP)
        else:
            terms.update(ch for ch in token if ch not in _CJK_STOP)
            terms.update(token[i : i + 2] for i in range(len(token) - 1))
    return terms


def core_terms(sentence: str) -> set[str]:
    """Terms of the clauses of ``sentence`` that carry its negation ("别动生产配置，先在测试环境验证" -> the first)."""
    clauses = [c for c in _CLAUSE.split(sentence) if c.strip()]
    negated = [c for c in clauses if _is_hard_negation(c)]
    if len(clauses) < 2 or not negated or len(negated) == len(clauses):
        return key_terms(sentence)
    terms: set[str] = set()
    for clause in negated:
        terms |= key_terms(clause)
    return terms or key_terms(sentence)


def _overlap(needle: set[str], hay: set[str]) -> float:
    return len(needle & hay) / len(needle) if needle else 0.0


_HARD_NEG_EN = re.compile(
    r"\b(?:not|no|never|don'?t|doesn'?t|didn'?t|won'?t|can'?t|cannot|mustn'?t|shouldn'?t|avoid\w*|without"
    r"|forb[ia]d\w*|prohibit\w*|refrain\w*|stop)\b|n't\b",
    re.I,
)
_HARD_NEG_ZH = re.compile(
    r"不(?!过|错|少|同|断|久|仅|但|超过|高于|低于|少于)|别(?![人的处名])|禁止|严禁|勿|未经|暂缓|没有|无需|不必"
)


def _is_hard_negation(sentence: str) -> bool:
    """A prohibition cue proper (not / never / 不要 ...), as opposed to a requirement cue (only / 必须)."""
    return bool(_HARD_NEG_EN.search(sentence) or _HARD_NEG_ZH.search(sentence))


def is_negated(sentence: str) -> bool:
    return bool(_NEG_EN.search(sentence) or _NEG_ZH.search(sentence))


def _is_request(sentence: str) -> bool:
    return bool(_REQUEST.search(sentence) or _REQUEST_ZH.search(sentence))


# ---------------------------------------------------------------- inputs


@dataclass
class _Statement:
    text: str
    index: int | None
    terms: set[str]
    #: terms of the negated clauses only (constraints): what an inversion must restate
    core: set[str] | None = None

    @property
    def action(self) -> set[str]:
        return self.core if self.core else self.terms


def _split_summary(summary: str) -> tuple[str, str]:
    """(prose, pinned section) of a summary or of a whole summary message."""
    parsed = parse_summary_message({"content": summary})
    body = parsed[1] if parsed else summary
    start = body.find(PINNED_HEADING)
    if start < 0:
        return body, ""
    end = body.find("\n## ", start + len(PINNED_HEADING))
    pinned = body[start:] if end < 0 else body[start:end]
    prose = body[:start] + ("" if end < 0 else body[end:])
    return prose, pinned


def _prose_sentences(prose: str) -> list[_Statement]:
    out = []
    for line in prose.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        line = re.sub(r"^[-*]\s+|^\d+[.)]\s+", "", line)
        for sentence in split_sentences(line):
            out.append(_Statement(sentence, None, key_terms(sentence)))
    return out


def _user_statements(messages: Sequence[dict[str, Any]]) -> tuple[list[_Statement], list[_Statement]]:
    """(constraints, approvals) said by users in ``messages``, plus those pinned in earlier summaries."""
    constraints: list[_Statement] = []
    approvals: list[_Statement] = []
    seen: set[str] = set()
    for index, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        if is_summary_message(m):
            body = (parse_summary_message(m) or ({}, ""))[1]
            for fact in pinned_facts_of(body):
                target = constraints if fact.kind == "constraint" else approvals if fact.kind == "approval" else None
                if target is not None and fact.text not in seen:
                    seen.add(fact.text)
                    target.append(_Statement(fact.text, index, key_terms(fact.text), core_terms(fact.text)))
            continue
        if m.get("role") != "user":
            continue
        for sentence in split_sentences(windowed(content_text(m), 16_000, 8_000)):
            if sentence in seen:
                continue
            if is_prohibition(sentence):
                seen.add(sentence)
                constraints.append(_Statement(sentence, index, key_terms(sentence), core_terms(sentence)))
            elif is_approval(sentence):
                seen.add(sentence)
                approvals.append(_Statement(sentence, index, key_terms(sentence)))
    return constraints, approvals


def _corpus(messages: Iterable[dict[str, Any]]) -> str:
    parts = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        parts.append(content_text(m))
        for call in m.get("tool_calls") or ():
            if isinstance(call, dict):
                parts.append(call_arguments(call))
    return "\n".join(parts)


# ---------------------------------------------------------------- checks


def _check_requirement(c: _Statement, prose: list[_Statement], pinned: str, summary: str) -> DriftFinding | None:
    """A positive constraint ("only use staging", "必须先备份"): inverted only when the summary negates it."""
    about = [s for s in prose if _overlap(c.terms, s.terms) >= MATCH or _overlap(c.action, s.terms) >= INVERT_MATCH]
    for s in about:
        if _overlap(c.action, s.terms) >= INVERT_MATCH and _is_hard_negation(s.text):
            return DriftFinding(
                "constraint_inverted",
                "high",
                {"original": c.text, "summary": s.text},
                c.index,
                "the summary negates a requirement",
            )
    if about or c.text in summary or (pinned and c.text in pinned):
        return None
    return DriftFinding(
        "constraint_dropped", "high", {"original": c.text, "summary": ""}, c.index, "no restatement found"
    )


def _check_constraint(c: _Statement, prose: list[_Statement], pinned: str, summary: str) -> DriftFinding | None:
    if len(c.terms) == 0:
        return None
    if not _is_hard_negation(c.text):
        return _check_requirement(c, prose, pinned, summary)
    action = c.action
    about = [s for s in prose if _overlap(c.terms, s.terms) >= MATCH or _overlap(action, s.terms) >= INVERT_MATCH]
    negated = [s for s in about if is_negated(s.text)]
    plain = [s for s in about if not is_negated(s.text)]
    strict = 1.0 if len(action) <= 3 else INVERT_MATCH
    for s in plain:
        # stated without its negation, as requested/planned/done: inverted, whatever else the summary says
        if _overlap(action, s.terms) >= strict and (_is_request(s.text) or not negated):
            return DriftFinding(
                "constraint_inverted",
                "high",
                {"original": c.text, "summary": s.text},
                c.index,
                "the summary states the constrained action without its negation",
            )
    if c.text in summary or negated:
        return None
    if pinned and c.text in pinned:
        return None
    return DriftFinding(
        "constraint_dropped", "high", {"original": c.text, "summary": ""}, c.index, "no restatement found"
    )


def _check_approval(a: _Statement, prose: list[_Statement], summary: str) -> DriftFinding | None:
    if not a.terms:
        return None
    about = [s for s in prose if _overlap(a.terms, s.terms) >= MATCH]
    if a.text not in summary:
        for s in about:
            if _overlap(a.terms, s.terms) < INVERT_MATCH:
                continue
            if is_negated(s.text) and not is_negated(a.text):
                return DriftFinding(
                    "constraint_inverted",
                    "high",
                    {"original": a.text, "summary": s.text},
                    a.index,
                    "an approval became a refusal",
                )
    if a.text in summary or about:
        return None
    return DriftFinding("constraint_dropped", "medium", {"original": a.text, "summary": ""}, a.index, "approval lost")


def _check_fabricated(
    prose: list[_Statement], pinned: str, constraints: list[_Statement], approvals: list[_Statement], corpus: str
) -> list[DriftFinding]:
    findings = []
    given = constraints + approvals
    for s in prose:
        claims_constraint = is_prohibition(s.text) and _ATTRIBUTION.search(s.text)
        claims_approval = is_approval(s.text) and _ATTRIBUTION.search(s.text) and not is_negated(s.text)
        if not (claims_constraint or claims_approval) or len(s.terms) < 2:
            continue
        if any(_overlap(s.terms, g.terms) >= MATCH or _overlap(g.terms, s.terms) >= INVERT_MATCH for g in given):
            continue
        if s.text in corpus:
            continue
        findings.append(
            DriftFinding(
                "constraint_fabricated",
                "medium",
                {"original": "", "summary": s.text},
                None,
                "a prohibition or approval no user gave",
            )
        )
    for fact in pinned_facts_of(pinned):
        if fact.kind in ("constraint", "approval") and fact.text not in corpus:
            findings.append(
                DriftFinding(
                    "constraint_fabricated",
                    "medium",
                    {"original": "", "summary": fact.text},
                    None,
                    "a pinned constraint or approval that is not in the originals",
                )
            )
    return findings


def _identifiers(text: str) -> set[str]:
    found = set(_STRONG_ID.findall(text))
    found.update(p for p in find_paths(text) if "/" in p and "." in p.rsplit("/", 1)[-1])
    return found


def _check_identifiers(
    messages: Sequence[dict[str, Any]], constraints: list[_Statement], summary: str, corpus: str
) -> list[DriftFinding]:
    findings = []
    in_constraints = {i for c in constraints for i in _identifiers(c.text)}
    for index, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "user" and not is_summary_message(m):
            for ident in sorted(_identifiers(windowed(content_text(m), 16_000, 8_000))):
                if ident not in summary:
                    findings.append(
                        DriftFinding(
                            "identifier_missing",
                            "medium" if ident in in_constraints else "low",
                            {"original": ident, "summary": ""},
                            index,
                            "an identifier the user gave is not in the summary",
                        )
                    )
    unique: dict[str, DriftFinding] = {}
    for finding in findings:
        unique.setdefault(finding.evidence["original"], finding)
    findings = list(unique.values())
    prose, _ = _split_summary(summary)
    for ident in sorted(_identifiers(prose)):
        if ident not in corpus:
            findings.append(
                DriftFinding(
                    "identifier_fabricated",
                    "medium",
                    {"original": "", "summary": ident},
                    None,
                    "an identifier that appears nowhere in the originals",
                )
            )
    return findings


def _confirms(plain: _Statement, hedged: _Statement) -> bool:
    later = plain.index is not None and hedged.index is not None and plain.index > hedged.index
    return later and _overlap(hedged.terms, plain.terms) >= INVERT_MATCH


def _check_hedges(messages: Sequence[dict[str, Any]], prose: list[_Statement]) -> list[DriftFinding]:
    hedged: list[_Statement] = []
    plain: list[_Statement] = []
    for index, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("assistant", "user") or is_summary_message(m):
            continue
        for sentence in split_sentences(windowed(content_text(m), 6_000, 4_000)):
            target = hedged if _HEDGE.search(sentence) else plain
            target.append(_Statement(sentence, index, key_terms(sentence)))
    findings = []
    for h in hedged:
        if len(h.terms) < 2:
            continue
        # confirmed later without a hedge: the summary may state it plainly
        if any(_confirms(p, h) for p in plain):
            continue
        about = [s for s in prose if _overlap(h.terms, s.terms) >= HEDGE_MATCH]
        if about and not any(_HEDGE.search(s.text) for s in about):
            findings.append(
                DriftFinding(
                    "hedge_lost",
                    "medium",
                    {"original": h.text, "summary": about[0].text},
                    h.index,
                    "an uncertain statement became a certain one",
                )
            )
    return findings


def check_drift(
    original_messages: Sequence[dict[str, Any]],
    summary_text: str,
    *,
    context_messages: Sequence[dict[str, Any]] | None = None,
) -> list[DriftFinding]:
    """Compare ``summary_text`` (a body or a whole summary message) with the messages it replaced.

    ``original_messages`` is the archived segment: its constraints must be kept,
    its identifiers must not be invented. ``context_messages`` (optional, e.g. the
    whole pre-compression history) adds constraints that stayed verbatim in the
    head or tail: the summary must not invert them, but need not repeat them;
    their ``source_index`` refers to ``context_messages``.
    Returns findings ordered by severity (high first), then source index.
    """
    if not summary_text:
        return []
    prose_text, pinned = _split_summary(summary_text)
    prose = _prose_sentences(prose_text)
    constraints, approvals = _user_statements(original_messages)
    corpus = _corpus(original_messages)
    findings: list[DriftFinding] = []
    for c in constraints:
        finding = _check_constraint(c, prose, pinned, summary_text)
        if finding:
            findings.append(finding)
    for a in approvals:
        finding = _check_approval(a, prose, summary_text)
        if finding:
            findings.append(finding)
    if context_messages:
        findings += _check_context(context_messages, prose, pinned, summary_text, constraints + approvals)
        corpus = corpus + "\n" + _corpus(context_messages)
        extra_c, extra_a = _user_statements(context_messages)
        constraints, approvals = constraints + extra_c, approvals + extra_a
    findings += _check_fabricated(prose, pinned, constraints, approvals, corpus)
    findings += _check_identifiers(original_messages, constraints, summary_text, corpus)
    findings += _check_hedges(original_messages, prose)
    rank = {"high": 0, "medium": 1, "low": 2}
    findings.sort(key=lambda f: (rank.get(f.severity, 3), f.source_index if f.source_index is not None else -1))
    return findings


def _check_context(
    context: Sequence[dict[str, Any]], prose: list[_Statement], pinned: str, summary: str, seen: list[_Statement]
) -> list[DriftFinding]:
    """Inversions of constraints said outside the segment (they stay verbatim, so dropping them is fine)."""
    known = {s.text for s in seen}
    constraints, approvals = _user_statements(context)
    findings = []
    for c in constraints:
        finding = None if c.text in known else _check_constraint(c, prose, pinned, summary)
        if finding and finding.kind == "constraint_inverted":
            findings.append(replace(finding, scope="context"))
    for a in approvals:
        finding = None if a.text in known else _check_approval(a, prose, summary)
        if finding and finding.kind == "constraint_inverted":
            findings.append(replace(finding, scope="context"))
    return findings
