"""Semantic drift checks: did the summary change what happened? (English and Chinese, no model)

Findings:

- ``constraint_dropped`` (high): a user constraint is in neither the prose nor the pinned facts;
- ``constraint_inverted`` (high): the prose states the constrained action without its negation as
  something requested, planned or done ("先不要修改 X" -> "用户要求修改 X"), even if the pinned facts
  still quote the constraint; negates a requirement or an approval ("not approved yet"); or reports a
  number past a bound the user set ("never below 3 replicas" -> "scaled down to 2");
- ``constraint_fabricated`` (medium): a prohibition or approval in the summary that no user gave;
- ``identifier_missing`` (medium/low): an identifier a user gave (path, ticket, train or room number, version,
  hash, error code, ``function()``, a number with its unit), or a ticket/version/error code the assistant
  reported (low), is nowhere in the summary;
- ``identifier_fabricated`` (medium/low): an identifier in the summary that appears nowhere in the originals;
  a number with its unit that no message holds (medium in a restated limit, else low: it may be derived);
- ``hedge_lost`` (medium): "suspected missing dependency" became "missing dependency";
- ``progress_fabricated`` (high/medium/low): a claim that something was done ("the migration has been
  executed", "tests passed, exit code 0", "已部署", "each function is now ≤ 40 lines") that the archive
  contradicts (high: "迁移没有执行", the last test run failed), or that nothing shows (low; medium for
  tests that never ran);
- ``wrong_attribution`` (medium): a statement put in the wrong mouth ("the user suspects ..." when the
  assistant did; "the user has added a test"; "the user requested approval"), or an error placed where it
  did not happen ("KeyError in ``fmt_money``").

Standing instructions count as constraints: a command to run keeps its command ("run
``pytest tests/export -q`` after every change"), a limit its number ("≤ 40 lines", "最多重试三次"); rules
the agent restates inside the segment ("Understood: staging only, ...") and requests made mid-run must be
kept too. Errors that appear only in tool output, files the agent wrote, short ids (``D-0``,
``sofia_kim_7287``) and what a tool showed over a user's limit are identifiers (low when missing). The
agent harness's own rules quoted in a user turn ("Every response MUST include a tool call") are not the
user's constraints.

Across languages (a Chinese constraint restated in English, or the reverse), statements are compared
through :func:`bridge_terms`: a small bilingual lexicon of actions and objects (deploy/部署, modify/修改,
migration/迁移, test/测试 ...), identifiers and numbers (三次 = 3). A prohibition turned into a plan for
later ("update the deploy script when ready", "稍后修改") is an inversion; one that names what it waits
for ("commit after the review") keeps it.

Matching is by key terms (words, crudely stemmed, and CJK characters and bigrams) after
mapping common synonyms to one word ("touch"/"edit" -> modify, "清理"/"删掉" -> 删除,
"roll back" -> rollback) and removing the cue words (negations, hedges, request verbs), so a
faithful paraphrase matches its original and the presence or absence of a cue decides.
Negation is judged per clause: "imports updated in notebooks/ too, so nothing uses the old
name" does not negate the update. A short approval ("yes, go ahead", "订吧") is read with the
proposal it answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import permutations
from typing import Any

from ..facts import (
    PINNED_HEADING,
    SERVER_ERROR,
    find_paths,
    has_error_hint,
    is_approval,
    is_prohibition,
    pinned_facts_of,
    salient_error_lines,
    split_sentences,
    user_statement_text,
    windowed,
)
from ..memo import remember_short
from ..messages import call_arguments, content_text, role_of, tool_calls_of
from ..prompt import PROMPTS
from ..summary_message import is_summary_message, parse_summary_message
from .types import DriftFinding

# ---------------------------------------------------------------- cues

#: advice or a decision against an action negates it ("advised against restarting"); a bare "against" names a
#: target ("never run migrations against production")
_AGAINST = r"(?:advis|recommend|warn|decid|argu)\w*\s+against"
# any negation or restriction: what makes a sentence a restatement of a constraint rather than its opposite
_NEG_EN = re.compile(
    r"\b(?:not|no|never|none|nothing|neither|nor|don'?t|doesn'?t|didn'?t|won'?t|can'?t|cannot|mustn'?t|shouldn'?t|isn'?t"
    r"|aren'?t|wasn'?t|weren'?t|haven'?t|hasn'?t|hadn'?t|couldn'?t|wouldn'?t|avoid\w*|without|forb[ia]d\w*"
    rf"|{_AGAINST}"
    r"|prohibit\w*|ban(?:s|ned)?|refrain\w*|off-limits|untouched|unchanged|intact|alone|read-only|hold\s+off"
    r"|only|until|unless|pending|before|must|always|at\s+most|at\s+least|limit(?:s|ed)?\s+(?:to|at)"
    r"|cap(?:s|ped)?\s+(?:at|to)|max(?:imum)?|keep|kept|leave|left\s+(?:as|alone|untouched|unchanged)"
    r"|preserv\w*|restrict\w*|disallow\w*|reject\w*|declin\w*|exclud\w*|requir\w*|stay(?:s|ed|ing)?"
    r"|remain(?:s|ed|ing)?|await\w*|wait(?:s|ed|ing)?\s+(?:for|until|on)|yet\s+to|as\s+(?:it\s+is|they\s+are|is))\b"
    r"|\bn't\b",
    re.I,
)
_BIE = r"(?<![特区类分个识级告性差辨鉴离])别(?![人的处名])"
# 不 except in words that are no negation (不过 "but", 不同 "different", 不稳定 "unstable" ...)
_NOT_ZH = r"不(?!过|错|少|同|断|久|仅|但|稳|一致|足|够|满|良|便|适|正常|兼容|如|然|管|论|止|确定|清楚"
_NEG_ZH = re.compile(
    _NOT_ZH + r")|" + _BIE + r"|禁止|严禁|勿|未经|暂缓|暂不|没(?!问题|事|关系)|尚未|还没"
    r"|未(?!来|知|必)(?![\u4e00-\u9fff]{1,6}的)|无需|不必|只能|只|仅|必须|务必|一定|最多|至少|以内|上限|保持|维持|保留|原样|拒绝|否决|之前|排除|才"
    r"|等.{0,12}(?:确认|再|才|之后|以后)|后再|不少于|不低于|不超过|不高于"
)
# prohibition cues proper (not / never / 不要), as opposed to requirement cues (only / 必须)
_HARD_NEG_EN = re.compile(
    r"\b(?:not|no|never|neither|nor|don'?t|doesn'?t|didn'?t|won'?t|can'?t|cannot|mustn'?t|shouldn'?t|avoid\w*"
    rf"|without|forb[ia]d\w*|prohibit\w*|refrain\w*|stop|{_AGAINST})\b|n't\b",
    re.I,
)
_HARD_NEG_ZH = re.compile(_NOT_ZH + r"|超过|高于|低于|少于)|" + _BIE + r"|禁止|严禁|勿|未经|暂缓|没有|无需|不必")


_REQUEST_CUES = (
    r"\b(?:asked|asks|ask|wants?|wanted|requested|requests?|instructed|told|should|will|plans?|planned|planning"
    r"|going\s+to|proceed\w*|approved|allowed|agreed|needs?\s+to|did|done|completed|let'?s|go\s+ahead|please|now)\b"
)
# actions reported as done are a request cue too, but they are content: never stripped from the terms
_DONE = (
    r"\b(?:modified|changed|updated|edited|deleted|removed|ran|deployed|restarted|published|released|scaled|applied"
    r"|added|used|uses|introduced|installed|upgraded|bumped|reverted|sent|replaced|renamed|created|cleaned|purged"
    r"|wiped|executed|migrated|switched|moved|rewr(?:ote|itten)|patched|pushed|shipped|merged|rotated|booked"
    r"|dropped|touched|altered|promised|promises|committed|rolled\s+(?:back|out)|(?:was|were|been|got)\s+run|enabled"
    r"|turned\s+on|activated|cancell?ed|refunded|committed|charged|upgraded|reset)\b"
)
_REQUEST = re.compile(_REQUEST_CUES + "|" + _DONE, re.I)
# "when ready", "later", "if needed": a prohibition ("not yet", "don't") turned into a plan for later
_SOFT = re.compile(
    r"\b(?:when\s+(?:(?:it\s+is|it'?s|we'?re|we\s+are|you'?re|you\s+are|everything\s+is)\s+)?ready|later(?!\s+than)"
    r"|if\s+(?:needed|necessary|required)|as\s+needed|when\s+(?:possible|needed|convenient|appropriate)|eventually"
    r"|at\s+some\s+point|in\s+due\s+course)\b"
    r"|准备好(?:后|之后|以后|了再|了就|就)?|稍后|晚些|晚点|回头|有需要(?:时|的话)?|必要时|需要时|需要的话|适当时候|合适的时候|之后再|以后再",
    re.I,
)
# an order at the start of a line: "Update the deployment script", "Run the migration"
_IMPERATIVE = re.compile(
    r"\s*(?:please\s+|then\s+|next[:,]?\s+)?(?:update|modify|change|edit|touch|deploy|run|execute|apply|delete|remove|drop"
    r"|restart|migrate|commit|push|merge|refund|cancel|book|send|install|upgrade|roll\s+(?:back|out)|rewrite|release"
    r"|publish|ship|replace|rename|enable|disable|purge|clean\s+up)\b"
    r"|\s*(?:请|再|然后|接着|下一步[：:，,]?|接下来[：:，,]?)?(?:修改|改|更新|删除|删|部署|发布|上线|执行|运行|重启|迁移|提交|合并|升级"
    r"|回滚|退款|取消|替换)",
    re.I,
)
_REQUEST_ZH = re.compile(r"要求|让|请|需要|应该|应当|计划|准备|打算|同意|批准|已经|已|了|将|要|开始|继续|执行|可以")
# uncertainty in what someone said ("I suspect", "可能")
_HEDGE = re.compile(
    r"\b(?:maybe|might|may(?!\s+\d)|suspect\w*|possibl[ey]|likely|probabl[ey]|perhaps|seems?"
    r"|appears?(?=\s+(?:to|that)\b)|it\s+appears"
    r"|could(?!\s+you\b)"
    r"|unclear|not\s+sure|uncertain|hypothes\w+|guess\w*|looks?\s+like|suggests?|presumabl[ey]|i\s+think"
    r"|i\s+believe|working\s+theory|can'?t\s+confirm|cannot\s+confirm"
    r"|not\s+(?:yet\s+)?(?:confirmed|verified|checked)|haven'?t\s+(?:yet\s+)?(?:confirmed|verified|checked))\b"
    r"|可能|也许|怀疑|疑似|似乎|大概|估计|不确定|或许|好像|看起来|看样子|推测|猜测|初步判断|初步|应该是"
    r"|待.{0,8}确认|尚未确认|尚未验证|还没确认|还没验证",
    re.I,
)
# a summary keeps a hedge also with a status mark: "(unverified)", "未确认" (in a request they are no hedge:
# "skip unverified numbers", "未验证的一律跳过")
_HEDGE_KEPT = re.compile(_HEDGE.pattern + r"|\b(?:unconfirmed|unverified|unchecked)\b|未确认|未验证", re.I)
# a refusal or a wait: what turns an approval around ("not approved", "still waiting for approval", "尚未批准")
_PENDING = re.compile(
    r"\b(?:not|no|never|don'?t|doesn'?t|didn'?t|hasn'?t|haven'?t|isn'?t|wasn'?t|without|pending|await\w*"
    r"|wait(?:s|ed|ing)?\s+for|yet\s+to|rejected|refused|declined|denied)\b|n't\b"
    r"|没|尚未|还未|未|待|" + _NOT_ZH + r"|超过|低于|少于|高于)|拒绝|否决|等.{0,8}(?:确认|同意|批准|决定|通知)",
    re.I,
)
_ATTRIBUTION = re.compile(
    r"\b(?:the\s+)?(?:user|you|they|he|she|we|i)\b|用户|你|他|她|我们|我|要求|希望|说|表示|强调|提到|指出", re.I
)
# summary sentences that claim a prohibition in words the constraint patterns miss ("asked us not to ...")
_CLAIM_EXTRA = re.compile(
    r"\bnot\s+to\b|\b(?:doesn'?t|does\s+not|don'?t|do\s+not|didn'?t)\s+want\b|不想|不希望|不愿", re.I
)
# constraint shapes the shared patterns miss: "production stays untouched", "leave notebooks/ alone"
_CONSTRAINT_EXTRA = re.compile(
    r"\b(?:stays?|remains?|is|are|be|kept)\s+(?:untouched|unchanged|off-limits|read-only|frozen|as\s+is|intact)\b"
    r"|\bread-only\b|\bleave\s+\S+(?:\s+\S+){0,3}\s+(?:alone|untouched|unchanged|as\s+(?:it\s+)?is)\b"
    r"|\bkeep\s+(?:\S+\s+){1,4}(?:unchanged|untouched|intact|as\s+(?:it\s+)?is)\b"
    r"|\bkeep\s+(?:the\s+)?[\w-]+(?:\s+[\w-]+)?\s+at\s+\d"
    r"|\bwithout\s+(?:adding|changing|touching|modifying|editing|deleting|removing|using|bumping|upgrading"
    r"|restarting|deploying|introducing|installing|pulling\s+in)\b"
    r"|(?:保持|维持)(?:原样|不变)|原封不动",
    re.I,
)
# standing instructions and limits: "after every change", "for anything else today", "≤ 40 lines", "每一步之后都"
_STANDING = re.compile(
    r"\b(?:after|before)\s+(?:every|each)\s+\w+|\b(?:every|each)\s+time\b|\bwhenever\b|\bfor\s+anything\s+else\b"
    r"|\bfrom\s+now\s+on\b|[≤≥]\s*\$?\d|<=\s*\$?\d|>=\s*\$?\d|\bhold\s+(?:off|on)\b|,\s*not\s+(?:the|my|a|an)\b"
    r"|每(?:一)?(?:步|次|个|条)|之后都|以后都|都要|都跑|都运行|都执行",
    re.I,
)
# the agent harness's own rules, quoted in a user turn: not the user's constraints ("Every response MUST ...")
_HARNESS = re.compile(
    r"\b(?:every|each)\s+(?:response|reply|turn|message|answer)\b|\b(?:MUST|NEVER|ALWAYS)\b"
    r"|\btool\s+calls?\b|\bfunction\s+calls?\b|\byou\s+(?:must|should)\s+(?:always\s+)?(?:respond|reply|answer|output)\b"
    r"|\b(?:as\s+an?\s+)?(?:ai|assistant|agent)\s+(?:you\s+)?(?:must|should|can)\b"
    r"|(?i:\byour\s+(?:response|reply|answer)s?\b|\b(?:in|per)\s+(?:one|a\s+single|each)\s+(?:response|reply)\b"
    r"|\bbash\s+(?:code\s+)?blocks?\b)"  # "YOUR RESPONSE WILL FAIL", "in one response", "one bash block"
    r"|每次回复|每条回复|每一轮|必须调用工具|工具调用",
)
# a command the user wants run, in backticks: "run `pytest tests/export -q` after every change"
_COMMAND = re.compile(r"`([^`\n]{3,120})`")

# "只同步已验证的" (the shared patterns know 只能 / 只用 only)
_REQUIREMENT_EXTRA = re.compile(r"(?<![一两三几每])只(?!是|有|要|好|不过|见|剩|会)[\u4e00-\u9fff]")
# words that point at what was just proposed: "book this one", "就订这家"
_DEICTIC = re.compile(r"\b(?:it|this|that|these|those|them)\b|这|那", re.I)
# cue words that describe rather than constrain: "crashes, always inside f()", "内存上限调到 1Gi"
_NOT_A_CONSTRAINT = re.compile(
    r"\balways\s+(?=(?:in|inside|at|on|after|before|when|with|from|during|within|under|for|the|a|an)\b|\w+s\b)"
    r"|(?:上限|最多|至少)(?=\s*(?:调|改|提|设|降|加|从|升))"
    r"|能不能|可不可以|要不要|是不是|会不会|行不行|有没有|用不用"
    r"|\b(?:it'?s|is|are|was|were)\s+only\s+(?:used|called|imported|needed|read|run|referenced)\b"
    # how long something went: "running for over 41 minutes", "took over 2 hours"
    r"|\b(?:for|took|takes|taking|lasted|ran)\s+(?:over|under|more\s+than|less\s+than|about|almost)\s+\d"
    # how something went: "running without any errors or failures", "没有任何报错"
    r"|\bwithout\s+(?:any\s+)?(?:(?:errors?|failures?|issues?|problems?|incidents?|downtime|warnings?)(?:,?\s+(?:or|and)\s+|,\s*)?)+"
    r"|没有(?:任何)?(?:错误|报错|问题|失败|异常|告警)"
    # what someone has or what there is: "Sofia Kim has no other reservations on HAT136"
    r"|\b(?:has|have|had|there\s+(?:is|are|was|were))\s+no\b",
    re.I,
)
# approvals the shared patterns miss: short answers to a proposal ("订吧", "就订这家", "yes, book it")
_APPROVAL_EXTRA = re.compile(
    r"\b(?:yes|yep|yeah|sure|ok(?:ay)?)\b[\s,.!]*(?:please\s+)?(?:do\s+it|book|buy|send|merge|deploy|run|ship|apply"
    r"|delete|start)\b|\b(?:do\s+it|book\s+it|go\s+for\s+it)\b"
    r"|订吧|就订|下单吧|买吧|就买|就这家|就选|就这个|就这么定|按这个(?:方案)?(?:改|来|做|办)"
    r"|可以[，,]?(?:订|买|下单|发|执行|开始|上)|好[的，,]*(?:订|买|去|发|开始)|行[，,](?:就|订|买)"
    # a short "X吧" reply: 发吧, 删吧, 开始吧 (not 算了吧, 再等等吧)
    r"|^\s*(?:好[的吧啊]?[，,]?\s*)?(?!.*(?:算了|等等|再等|先等|不|别))[\u4e00-\u9fff]{1,4}吧[。！!]?\s*$",
    re.I,
)
#: hex with a letter and a digit in it: the body of a git sha or a sha256 digest (a length bound follows)
_HEX = r"(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]"
_STRONG_ID = re.compile(
    # each starts with a digit or a word's first letter: the lookahead passes other positions at once (twice as fast)
    r"(?=\b[A-Za-z]|\d)(?:"
    r"(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?::\d{2,5})?(?![\d.])"  # address: 10.0.3.17:6379
    r"|\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b"  # ticket
    r"|\b[A-Z]-\d\b"  # short id: D-0
    r"|\b[a-z]+(?:_[a-z]+)+_\d{2,}\b"  # user id: sofia_kim_7287
    r"|\b(?=[A-Z0-9]*\d[A-Z0-9]*[A-Z])(?=[A-Z0-9]*[A-Z][A-Z0-9]*\d)[A-Z0-9]{6}\b"  # reservation: NO6JO3, K1NW8N
    r"|\b[GDCZTKY]\d{1,4}\b"  # train
    r"|\b[A-Z]{1,3}\d{6,}\b"  # order, booking reference
    r"|\b[A-Z]-\d{2,5}\b"  # room
    r"|\bv\d+(?:\.\d+){1,3}\b|\b\d+\.\d+\.\d+\b"  # version
    rf"|\b{_HEX}{{7,64}}\b"  # hash (a git sha, a sha256 digest)
    r"|\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"  # error code / constant: PAY_TIMEOUT_3012
    r"|\bE(?:CONN|ADDR|HOST|NET|NO|TIMED|ACCES|PERM|PIPE|EXIST|RESOLVE)[A-Z]*\b)",  # errno: ECONNRESET
    re.ASCII,
)
_FUNCTION = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\(\)", re.ASCII)
_QUANTITY = re.compile(
    r"(?<![A-Za-z0-9_.])(\d[\d,]*(?:\.\d+)?)\s?(?:ms|s|sec|secs|seconds|min|mins|minutes|h|hrs|hours|days|KB|MB|GB|TB|KiB|MiB"
    r"|GiB|Mi|Gi|%|rows|tokens|qps|rps|USD|EUR|CNY|RMB)\b"
    r"|(\d[\d,]*(?:\.\d+)?)\s?(?:元|块钱|万元|天|晚|小时|分钟|秒|公里|人|间|张|%)"
)


# ---------------------------------------------------------------- terms

# phrases and synonyms mapped to one word before the terms are taken (both sides get the same treatment)
_NORMALIZE_EN = (
    (
        re.compile(r"\broll(?:s|ed|ing)?[\s-]+(?:it\s+|this\s+|that\s+|them\s+)?back\b|\brollbacks?\b", re.I),
        " rollback ",
    ),
    (
        re.compile(
            r"\broll(?:s|ed|ing)?[\s-]+out\b|\brollouts?\b|\b(?:turn|switch)(?:s|ed|ing)?\s+(?:it\s+)?on\b"
            r"|\benabl\w*|\bactivat\w*|\b(?:is|are|was|were)\s+on\b",
            re.I,
        ),
        " deploy ",
    ),
    # a building letter: "A 座", "B栋"; room codes name it too ("A-301")
    (re.compile(r"(?<![A-Za-z0-9])([A-Z])\s*(?:座|栋|号楼|楼|区)"), r" \1block "),
    (re.compile(r"\b([A-Z])-\d{2,5}\b"), r"\g<0> \1block "),
    (re.compile(r"\b(?:pull|bring)(?:s|ed|ing)?\s+in\b", re.I), " add "),
    # "leave X alone", "X stays untouched": the action is a change of X
    (
        re.compile(
            r"\b(?:untouched|unchanged|intact|alone|off-limits|read-only|as\s+(?:it\s+is|they\s+are|is))\b", re.I
        ),
        " modify ",
    ),
    # "without asking me first" is "without the user's go-ahead"
    (
        re.compile(
            r"\bask(?:s|ed|ing)?\s+(?:(?:me|us|him|her|them|the\s+user|first|for\s+(?:approval|permission))\b\s*){1,3}"
            r"|\b(?:go-ahead|approval|permission|consent|sign-off|say-so)\b",
            re.I,
        ),
        " consent ",
    ),
    # parts of today are today: "don't deploy today" / "deployed this afternoon"
    (re.compile(r"\b(?:today|tonight|this\s+(?:morning|afternoon|evening))\b", re.I), " today "),
    # a deadline is a date: "refund within 5 business days" promises a refund date
    (
        re.compile(
            r"\b(?:within|in)\s+\d+\s+(?:business\s+|working\s+)?(?:days?|weeks?|hours?)\b"
            r"|\bby\s+(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|\btomorrow\b",
            re.I,
        ),
        " date ",
    ),
)
_NORMALIZE_ZH = (
    (re.compile(r"今天(?:上午|下午|晚上)?|今晚|今早"), "今天"),
    (re.compile(r"(?:保持|维持)?(?:原样|不变)"), " 修改 "),
    (re.compile(r"发出去|发出|发给|寄出|发送|(?<=[别不没先再未暂])发(?![布现生版])"), "发送"),
    (
        re.compile(
            r"改动|更改|变更|调整|编辑|改写|修改|改成|改为|更新|(?<![修更篡])改(?![善进革名])"
            r"|(?<=[别不没再要能许都也先得])(?:动|碰)(?![态作力画员机词物])|操作"
        ),
        "修改",
    ),
    (re.compile(r"删除|删掉|清理|清除|清空|移除|去掉|删"), "删除"),
    (re.compile(r"\d+\s*个?(?:工作日|自然日|天|小时|周)(?:之内|以内|内)"), " 时间 "),
    (re.compile(r"日期|时间点|时间|日子"), "时间"),
    (
        re.compile(
            r"引入|加入|添加|增加|新增|加上|加进|安装|使用|采用|用上|(?<![增添参更附叠])加(?![速密载班工拿热快大])"
        ),
        "引入",
    ),
    (re.compile(r"部署|上线|发布|发版"), "部署"),
    (re.compile(r"重启|重新启动"), "重启"),
    (re.compile(r"回滚|回退"), "回滚"),
    (re.compile(r"替换|换成|替代|取代"), "替换"),
    (re.compile(r"承诺|保证|答应"), "承诺"),
    (re.compile(r"执行|运行|(?<![长赛])跑(?!步)"), "执行"),
    (re.compile(r"创建|新建|建立|(?<![修构重])建(?!议|筑|设)"), "创建"),
    (re.compile(r"预订|预定|订购|下单|购买|(?<!预)订(?!单)|(?<!购)买"), "预订"),
    (re.compile(r"停用|禁用|停掉"), "停用"),
)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_CJK_WORD = re.compile(r"[\u4e00-\u9fff]+")

_STOP_WORDS = """the a an and or to of for in on at by is are was were be been it its this that these those with from as
    any anything all some user users you your they them we our us i me my he she his her do does did under over
    into onto about just also so but if then there here has have had yet still which who what why when while
    because since once via per than shall whether either each every own one ones"""
_STOP = frozenset(_STOP_WORDS.split())
# words whose stem the crude stemmer gets wrong, or irregular forms
_WORDS = {"use": "add", "uses": "add", "used": "add", "using": "add", "sent": "send", "ran": "run", "install": "add"}
_SYNONYMS = {
    "chang": "modify",
    "edit": "modify",
    "alter": "modify",
    "touch": "modify",
    "updat": "modify",
    "modifi": "modify",
    "rewrit": "modify",
    "rewrot": "modify",
    "tweak": "modify",
    "adjust": "modify",
    "patch": "modify",
    "remov": "delet",
    "drop": "delet",
    "purg": "delet",
    "wip": "delet",
    "eras": "delet",
    "clean": "delet",
    "execut": "run",
    "appli": "run",
    "apply": "run",
    "launch": "run",
    "trigger": "run",
    "releas": "deploy",
    "ship": "deploy",
    "push": "deploy",
    "publish": "deploy",
    "introduc": "add",
    "includ": "add",
    "adopt": "add",
    "bump": "upgrad",
    "revert": "rollback",
    "reboot": "restart",
    "bounc": "restart",
    "email": "send",
    "mail": "send",
    "guarante": "promis",
    "reserv": "book",
    "purchas": "book",
    "buy": "book",
}
#: actions that change something: a "don't touch X" is broken by any of them on X
_WRITE_EN = frozenset(
    ["modify", "delet", "add", "run", "deploy", "upgrad", "rollback", "restart", "scal", "renam", "replac", "migrat"]
    + ["switch", "mov", "rotat"]
)
_WRITE_ZH = frozenset(["修改", "删除", "引入", "部署", "执行", "重启", "回滚", "替换", "停用"])
#: action words (verbs) among the terms; creating a ticket or sending a mail about X does not touch X
_VERB_WORDS = _WRITE_EN | _WRITE_ZH | {"creat", "send", "book", "promis", "创建", "发送", "预订", "承诺"}
#: the same, with the characters of the Chinese ones
_VERBS = _VERB_WORDS | {ch for word in _VERB_WORDS if _CJK_WORD.fullmatch(word) for ch in word}
#: the same, as lexicon concepts (see :func:`bridge_terms`)
_VERB_CONCEPTS = frozenset(
    ["modify", "delet", "deploy", "run", "add", "restart", "rollback", "replac", "disabl", "creat", "send", "book"]
    + ["promis", "migrat", "commit", "refund", "cancel", "upgrad", "split", "renam", "merg", "chang"]
)
# (not inside numbers: "1,284", "12:40")
_CLAUSE = re.compile(r"[，;；：]|(?<!\d)[,:]|[,:](?!\d)|\s+-\s+|\binstead\b|\bbut\b|但是|而是|然后")
# constraints are also cut before their condition: "do not delete X | until Y is verified"
_CONDITION = re.compile(r"\b(?:until|unless|once)\b|等到|直到")
_CJK_STOP = "的了是在和把将也都就而及与或被给对从向到这那个些一再吧吗呢啊里"
_CJK_SPLIT = re.compile(f"[{_CJK_STOP}]+")
_EN_WORD = re.compile(r"[A-Za-z0-9_./@-]+|[\u4e00-\u9fff]+")
_ALPHA = re.compile(r"[a-z]+")
_HYPHENATED = re.compile(r"[a-z]+(?:-[a-z]+)+")
# every cue starts with a word's first letter or with a CJK character: the lookahead lets the scan pass any other
# position at once (on long tool output the pattern alone takes three times as long)
_CUE_STRIP = re.compile(
    r"(?=\b[a-z]|[\u4e00-\u9fff])(?:"
    + _NEG_EN.pattern
    + "|"
    + _REQUEST_CUES
    + "|"
    + _HEDGE_KEPT.pattern
    + r"|\b(?:approv\w*|permission)\b)",
    re.I,
)
_CUE_STRIP_ZH = re.compile(
    r"先不要|千万不要|千万别|不要|不许|不准|不能|不得|不可以|不允许|不少于|不低于|不超过|不高于|禁止|严禁|"
    + _BIE
    + r"|勿|未经|暂缓|暂不"
    r"|暂时|没有|还没|尚未|无需|不必|只能|只|仅|必须|务必|一定|要求|让|请|需要|应该|应当|计划|准备|打算|同意|批准|已经|已|了"
    r"|将|要|开始|继续|可以|可能|也许|怀疑|疑似|似乎|大概率|大概|估计|不确定|或许|好像|看起来|推测|用户|你|我们|我|他|她|先|再"
    r"|记得|的时候|时候|之后|之前|以前|以后|后再|才|超过|低于|高于|少于|上限|以内|最多|至少|任何时候|始终|一律|总是|一直|保持|维持"
    r"|不|没|未|的|把|是|吗|呢|吧|任何|所有|一切"
)

#: share of a statement's key terms a summary sentence must contain to be "about" it
MATCH = 0.5
#: stricter share used to call an un-negated sentence an inversion
INVERT_MATCH = 0.75
#: share of a hedged statement's terms a summary sentence must repeat to be "about" it
HEDGE_MATCH = 0.6


def _stem(word: str) -> str:
    if word in _WORDS:
        return _WORDS[word]
    for suffix in ("ing", "ied", "ies", "ed", "es", "s", "e"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)] + ("i" if suffix in ("ied", "ies") else "")
            if suffix in ("ing", "ed") and len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # running -> run, stopped -> stop
            break
    return _SYNONYMS.get(word, word)


def _normalize(text: str) -> str:
    for pattern, word in _NORMALIZE_EN:
        text = pattern.sub(word, text)
    if _CJK.search(text):
        for pattern, word in _NORMALIZE_ZH:
            text = pattern.sub(word, text)
    return text


def _terms(text: str) -> tuple[set[str], set[str]]:
    """(all key terms, the identifier-like ones among them) of ``text``: fresh sets the caller may change."""
    terms, anchors = _frozen_terms(text)
    return set(terms), set(anchors)


# the checks compare every summary sentence with every statement of a long history: each text is parsed once
@remember_short(max_chars=10_000, maxsize=16_384)
def _frozen_terms(text: str) -> tuple[frozenset[str], frozenset[str]]:
    text = _CUE_STRIP.sub(" ", _normalize(text))
    if _CJK.search(text):
        text = _CUE_STRIP_ZH.sub(" ", text)
    terms: set[str] = set()
    anchors: set[str] = set()
    for token in _EN_WORD.findall(text):
        if token.isascii():
            is_path = "/" in token
            # "US", "EU", "QA" are names, not the stop words "us" ...
            token = token.strip("./-@")
            name = token.isupper() and token.isalpha()
            token = token.lower()
            if len(token) < 2 or (token in _STOP and not name):
                continue
            if _ALPHA.fullmatch(token):
                terms.add(_stem(token))
                if is_path:  # a directory: "notebooks/"
                    anchors.add(_stem(token))
            elif _HYPHENATED.fullmatch(token):  # second-class, bank-side: their words
                terms.update(_stem(p) for p in token.split("-") if len(p) > 1 and p not in _STOP)
            else:  # an identifier (path, version, name_with_underscores): kept whole, and by its parts
                parts = {p for p in re.split(r"[/.@_-]", token) if len(p) > 2 and p not in _STOP}
                found = {token} | {_stem(p) if _ALPHA.fullmatch(p) else p for p in parts}
                terms |= found
                anchors |= found
        else:
            for run in _CJK_SPLIT.split(token):
                terms.update(run)
                terms.update(run[i : i + 2] for i in range(len(run) - 1))
    return frozenset(terms), frozenset(anchors)


def key_terms(text: str) -> set[str]:
    """Cue-free content terms of ``text``: stemmed English words, identifiers, CJK characters and bigrams.

    CJK counts by characters as well as bigrams, so word order changes ("删除日志" / "日志已删除")
    still match; synonyms count as one word ("清理日志" / "删除日志").
    """
    return _terms(text)[0]


# ---------------------------------------------------------------- across languages

#: a small bilingual lexicon of actions and objects: (concept, English stems, Chinese words). A constraint
#: said in one language and restated in the other is matched through these concepts, identifiers and numbers
#: (the Chinese words are looked up after :func:`_normalize`, so 改动 / 更新 / 动 are already 修改)
_LEXICON = (
    ("modify", "modify", "修改"),
    ("delet", "delet deletion", "删除"),
    ("deploy", "deploy deployment", "部署"),
    ("run", "run", "执行"),
    ("add", "add addition", "引入"),
    ("restart", "restart", "重启"),
    ("rollback", "rollback", "回滚"),
    ("replac", "replac replacement", "替换"),
    ("disabl", "disabl stop", "停用|停止|停下"),
    ("creat", "creat creation", "创建"),
    ("send", "send", "发送"),
    ("book", "book", "预订"),
    ("promis", "promis", "承诺"),
    ("migrat", "migrat migration", "迁移"),
    ("test", "test pytest", "测试|用例"),
    ("script", "script sh", "脚本"),
    ("databas", "databas db", "数据库"),
    ("retry", "retry retri", "重试"),
    ("commit", "commit", "提交"),
    ("refund", "refund", "退款|退钱"),
    ("cancel", "cancel cancell cancellation", "取消"),
    ("prod", "prod production", "生产|正式环境|线上"),
    ("stag", "stag", "预发"),
    ("config", "config configur configuration", "配置"),
    ("log", "log", "日志"),
    ("file", "file", "文件"),
    ("function", "function func", "函数"),
    ("line", "line", "(?<=\\d)\\s*行|行数|多少行"),
    ("upgrad", "upgrad", "升级"),
    ("volum", "volum", "卷"),
    ("imag", "imag", "镜像"),
    ("health", "health", "健康"),
    ("check", "check", "检查"),
    ("status", "status", "状态"),
    ("command", "command", "命令"),
    ("review", "review", "审查|评审|审核|过目"),
    ("confirm", "confirm", "确认"),
    ("pay", "pay payment", "付款|支付|付费"),
    ("gift", "gift", "礼品"),
    ("card", "card", "卡"),
    ("credit", "credit", "信用"),
    ("bag", "bag baggag luggag", "行李"),
    ("flight", "flight", "航班"),
    ("order", "order", "订单"),
    ("address", "address", "地址"),
    ("lock", "lock", "锁"),
    ("permiss", "permiss", "权限"),
    ("refus", "refus deni", "拒绝"),
    ("servic", "servic", "服务"),
    ("ticket", "ticket", "工单|变更单"),
    ("cache", "cach cache", "缓存"),
    ("export", "export", "导出"),
    ("split", "split", "拆分|拆成|拆开"),
    ("renam", "renam", "重命名|改名"),
    ("merg", "merg", "合并"),
    ("return", "return", "返程|回程|退货"),
    ("exchang", "exchang", "换货"),
    ("item", "item", "商品"),
    ("email", "email", "邮件|邮箱"),
    ("phone", "phone", "电话|手机"),
    ("user", "user", "用户"),
    ("backup", "backup", "备份"),
    ("monitor", "monitor", "监控"),
    ("alert", "alert", "告警|报警"),
    ("secret", "secret", "密钥|密码"),
    ("branch", "branch", "分支"),
    ("pod", "pod", "pod"),
    ("tail", "tail", "末尾|结尾|最后几行"),
    ("output", "output", "输出"),
    ("step", "step", "每一步|每步|步骤"),
    ("chang", "chang", "改完|改动后|修改后"),
    ("hour", "hour hr", "小时"),
    ("minut", "minut min", "分钟"),
    ("half", "half", "半"),
    ("week", "week", "周|星期"),
    ("today", "today", "今天"),
    ("date", "date", "明天|日期|到账时间"),
    ("chase", "chase urg remind nudg", "催"),
    ("shipment", "shipment deliveri logist track", "物流|快递|发货|运输"),
    ("conclus", "conclus conclud", "结论"),
    ("quantiti", "quantiti", "数量"),
    ("round", "round", "舍入|四舍五入|取整"),
    ("discount", "discount", "折扣"),
    ("tax", "tax", "税"),
    ("level", "level", "级别"),
    ("limit", "limit", "限制|上限"),
    ("timeout", "timeout", "超时"),
    ("password", "password", "密码"),
    ("account", "account", "账号|账户"),
    ("price", "price cost", "价格|费用|价钱"),
    ("total", "total", "总共|总计|合计"),
)
# (each English word by itself and by its stem, as :func:`key_terms` writes it)
_BRIDGE_EN: dict[str, str] = {stem: concept for concept, stems, _ in _LEXICON for stem in stems.split()}
for _concept, _stems, _ in _LEXICON:
    for _word in _stems.split():
        _BRIDGE_EN.setdefault(_stem(_word), _concept)
_BRIDGE_ZH = tuple((re.compile(words), concept) for concept, _, words in _LEXICON)
_NUMBER_WORDS = {"one": "1", "once": "1", "two": "2", "twice": "2", "three": "3", "thrice": "3", "four": "4"}
_NUMBER_WORDS |= {"five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10"}
_ZH_DIGITS = {"一": "1", "两": "2", "二": "2", "三": "3", "四": "4", "五": "5", "六": "6", "七": "7", "八": "8"}
_ZH_DIGITS |= {"九": "9", "十": "10"}
_ZH_NUMBER = re.compile(r"([一两二三四五六七八九十])(?=次|个|行|天|条|分钟|小时|秒|遍|台|间|张|晚|人)")
_EN_NUMBER = re.compile(r"\b(" + "|".join(_NUMBER_WORDS) + r")\b", re.I)
_DIGITS = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]\d)")


def is_chinese(text: str) -> bool:
    """Whether ``text`` is written in Chinese (a share of CJK characters, not an identifier in a quote)."""
    cjk = len(_CJK.findall(text))
    return cjk >= 2 and cjk * 3 >= len(re.sub(r"\s", "", text)) * 0.5


def bridge_terms(text: str) -> set[str]:
    """The language-neutral terms of ``text``: lexicon concepts, numbers, and its identifiers (every ASCII term
    of a Chinese text; the identifier-like ones of an English text).

    "先不要修改部署脚本 deploy.sh" and "don't modify the deployment script deploy.sh" share
    ``{"modify", "deploy", "script", "deploy.sh"}``.
    """
    terms, anchors = _terms(text)
    chinese = is_chinese(text)
    out = {_BRIDGE_EN[t] for t in terms if t in _BRIDGE_EN}
    out |= {t for t in terms if t.isascii()} if chinese else anchors
    # "deploy.sh" is a deploy script; "rates.py" a file
    for t in anchors:
        if t.endswith((".sh", ".bash", ".ps1")):
            out.add("script")
        if re.fullmatch(r"\d{3,}_[a-z][a-z0-9_]*", t):  # 0042_add_index, 0057_split_orders: a migration
            out.add("migrat")
    if _CJK.search(text):
        normalized = _normalize(text)
        out |= {concept for pattern, concept in _BRIDGE_ZH if pattern.search(normalized)}
        out |= {_ZH_DIGITS[m.group(1)] for m in _ZH_NUMBER.finditer(text)}
    out |= {_NUMBER_WORDS[m.group(1).lower()] for m in _EN_NUMBER.finditer(text)}
    out |= set(_DIGITS.findall(text))
    return out


@lru_cache(maxsize=16_384)
def _is_hard_negation(sentence: str) -> bool:
    """A prohibition cue proper (not / never / 不要 ...), as opposed to a requirement cue (only / 必须)."""
    return bool(_HARD_NEG_EN.search(sentence) or _HARD_NEG_ZH.search(sentence))


@lru_cache(maxsize=16_384)
def is_negated(sentence: str) -> bool:
    """Whether ``sentence`` carries a negation or restriction cue (not, only, keep, 不要, 只能, 保持 ...)."""
    return bool(_NEG_EN.search(sentence) or _NEG_ZH.search(sentence))


@lru_cache(maxsize=16_384)
def _is_request(sentence: str) -> bool:
    return bool(
        _REQUEST.search(sentence)
        or _REQUEST_ZH.search(sentence)
        or _SOFT.search(sentence)
        or _IMPERATIVE.match(sentence)
    )


@lru_cache(maxsize=16_384)
def _is_constraint(sentence: str) -> bool:
    """A user's prohibition or requirement (the shared patterns, plus "X stays untouched" and standing
    instructions such as "run X after every change" or "≤ 40 lines"; not "always in f()")."""
    if _CONSTRAINT_EXTRA.search(sentence) or _REQUIREMENT_EXTRA.search(sentence) or _STANDING.search(sentence):
        return True
    return is_prohibition(_NOT_A_CONSTRAINT.sub(" ", sentence))


def _is_prohibitive(sentence: str) -> bool:
    """A constraint that forbids an action ("don't X", "X stays untouched"), not one that requires it."""
    return _is_hard_negation(sentence) or bool(_CONSTRAINT_EXTRA.search(sentence))


@lru_cache(maxsize=16_384)
def _is_approval(sentence: str) -> bool:
    return is_approval(sentence) or bool(_APPROVAL_EXTRA.search(sentence))


def _clauses(sentence: str) -> list[str]:
    return [c for c in _CLAUSE.split(sentence) if c.strip()]


def core_terms(sentence: str) -> set[str]:
    """Terms of the clauses of ``sentence`` that carry its constraint, without their conditions.

    "别动生产配置，先在测试环境验证" -> the first clause; "do not delete X until Y" -> "do not delete X".
    """
    clauses = [c for part in _clauses(sentence) for c in _CONDITION.split(part) if c.strip()]
    carrying = [c for c in clauses if _is_constraint(c)]
    carrying = [c for c in carrying if _is_prohibitive(c)] or carrying
    if len(clauses) < 2 or not carrying or len(carrying) == len(clauses):
        return key_terms(sentence)
    terms: set[str] = set()
    for clause in carrying:
        terms |= key_terms(clause)
    return terms or key_terms(sentence)


def _overlap(needle: AbstractSet[str], hay: AbstractSet[str]) -> float:
    return len(needle & hay) / len(needle) if needle else 0.0


_DONE_EN = re.compile(_DONE, re.I)
_DONE_ZH = re.compile(
    r"(?:已经?|将|把|刚)[^，。；：,;:]{0,12}?(修改|删除|引入|部署|执行|重启|回滚|替换|停用)"
    r"|(修改|删除|引入|部署|执行|重启|回滚|替换|停用)(?:了|完|过|掉|好)"
)


def _done_actions(text: str) -> set[str]:
    """Actions ``text`` reports as done ("applied", "已替换", "加了"), as terms; not nouns ("a production run")."""
    done = key_terms(" ".join(m.group(0) for m in _DONE_EN.finditer(text))) & _WRITE_EN
    if _CJK.search(text):
        done |= {m.group(1) or m.group(2) for m in _DONE_ZH.finditer(_normalize(text))}
    return done


def _expand(clause: _Clause) -> set[str]:
    """The terms of ``clause``, plus "modify" when it reports a change done (deleted, added, deployed ...)."""
    if not clause.done:
        return clause.terms
    extra = {"modify"} if clause.done & _WRITE_EN else set()
    if clause.done & _WRITE_ZH:
        extra |= {"修", "改", "修改"}
    return clause.terms | extra


# ---------------------------------------------------------------- inputs


@dataclass
class _Clause:
    text: str
    terms: set[str]
    negated: bool
    hedged: bool
    request: bool
    #: the changes it reports as done (see :func:`_done_actions`)
    done: set[str] = field(default_factory=set)


@dataclass
class _Statement:
    text: str
    index: int | None
    terms: set[str]
    #: terms of the clauses that carry the constraint (constraints), or an approval's own words
    core: set[str] | None = None
    #: identifier-like terms (paths, versions, names_with_underscores) among ``terms``
    anchors: set[str] = field(default_factory=set)
    #: the clauses of a summary sentence, when it has more than one
    clauses: list[_Clause] = field(default_factory=list)
    #: the action words a prohibition forbids (see :func:`_negated_verbs`)
    verbs: set[str] = field(default_factory=set)

    @property
    def action(self) -> set[str]:
        return self.core if self.core else self.terms


def _summary_sentence(text: str) -> _Statement:
    terms, anchors = _terms(text)
    parts = _clauses(text)
    clauses = []
    if len(parts) > 1:
        clauses = [
            _Clause(p, key_terms(p), is_negated(p), bool(_HEDGE_KEPT.search(p)), _is_request(p), _done_actions(p))
            for p in parts
        ]
    return _Statement(text, None, terms, anchors=anchors, clauses=clauses)


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
            out.append(_summary_sentence(sentence))
    return out


def _constraint(text: str, index: int | None) -> _Statement:
    terms, anchors = _terms(text)
    core = core_terms(text)
    verbs = _negated_verbs(text) or (core - anchors) & _VERB_WORDS
    return _Statement(text, index, terms, core, anchors & core, verbs=verbs)


_ACKNOWLEDGED = re.compile(
    r"^\s*(?:understood|noted|got\s+it|will\s+do|sure|ok(?:ay)?|明白|收到|好的|了解|知道了)\s*[:：,，.。!！]\s*(?P<rules>.+)",
    re.I | re.S,
)


# a user's request made mid-run: "Also, can you add one checked bag?", "顺便把日志级别改成 INFO"
_REQUEST_TURN = re.compile(
    r"^\W*(?:(?:also|and|btw|by\s+the\s+way|great|thanks|ok(?:ay)?|one\s+more\s+thing|meanwhile|in\s+the\s+meantime"
    r"|while\s+you'?re\s+(?:at\s+it|in\s+there|waiting))[,.:!]?\s+)*"
    r"(?:(?:can|could|would)\s+you\s+(?:please\s+)?|please\s+)?"
    r"(?:add|open|fix|split|rename|prepare|check|write|create|change|update|book|cancel|refund|send|look\s+(?:at|into)"
    r"|find|run|rebook|upgrade|move|switch|set|make)\b"
    r"|^\W*(?:(?:顺便|另外|还有|同时|对了|这期间|再|先|那就|好，)[，,]?)?(?:帮我|请|麻烦你?)?"
    r"(?:把|准备|查一下|看一下|查查|改成|加一|添加|拆|建|开一?个|写|发)",
    re.I,
)


def _content_words(sentence: str) -> set[str]:
    """Key terms of ``sentence`` beyond its verbs and single CJK characters."""
    return {t for t in key_terms(sentence) - _VERBS if not (len(t) == 1 and _CJK.match(t))}


def _acknowledged(text: str) -> list[str]:
    """The rules an agent's acknowledgement restates ("Understood: staging only, at most 3 retries."): each
    constraint-shaped item of its first sentence."""
    m = _ACKNOWLEDGED.match(text)
    if m is None:
        return []
    first = split_sentences(m.group("rules"))[:1]
    items = [i.strip(" .。") for part in first for i in re.split(r"[,，;；、]|\band\b", part)]
    return [i for i in items if len(i) >= 4 and (_is_constraint(i) or _STANDING.search(i)) and not _HARNESS.search(i)]


def _user_turns(
    messages: Sequence[dict[str, Any]],
) -> tuple[list[_Statement], list[_Statement], list[_Statement]]:
    """(constraints, approvals, requests) said by users in ``messages``, plus those pinned in earlier summaries.

    A request is a turn asking for something ("Also, can you add one checked bag?", "顺便把日志级别改成 INFO").

    A short approval ("yes, go ahead", "订吧") also gets the terms of the proposal it answers
    (the end of the assistant message before it).
    """
    constraints: list[_Statement] = []
    approvals: list[_Statement] = []
    requests: list[_Statement] = []
    # the first user turn of a history is the task, not a request made mid-run (a segment cut from the middle
    # of a run has no task: its first user turn comes after the agent's work)
    first_user = next((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"), -1)
    if any(isinstance(m, dict) and m.get("role") in ("assistant", "tool") for m in messages[: max(first_user, 0)]):
        first_user = -1
    seen: set[str] = set()
    proposal = ""
    for index, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        if is_summary_message(m):
            body = (parse_summary_message(m) or ({}, ""))[1]
            for fact in pinned_facts_of(body):
                if fact.kind in ("constraint", "approval") and fact.text not in seen:
                    seen.add(fact.text)
                    if fact.kind == "constraint":
                        constraints.append(_constraint(fact.text, index))
                    else:
                        approvals.append(_Statement(fact.text, index, key_terms(fact.text)))
            continue
        if m.get("role") == "assistant":
            text = content_text(m)
            proposal = " ".join(split_sentences(text[-1_000:])[-2:]) if text.strip() else proposal
            # "Understood: staging only, pods listed after each step, at most 3 retries": the user's rules,
            # said before the segment and restated by the agent inside it
            for rule in _acknowledged(text):
                if rule not in seen:
                    seen.add(rule)
                    constraints.append(_constraint(rule, index))
            continue
        if m.get("role") != "user":
            continue
        text = user_statement_text(content_text(m))  # the text facts.py reads (edges of pasted output)
        for sentence in split_sentences(text):
            if sentence in seen or _HARNESS.search(sentence):
                continue
            if _is_constraint(sentence):
                seen.add(sentence)
                constraints.append(_constraint(sentence, index))
            elif index > first_user and _REQUEST_TURN.search(sentence) and len(_content_words(sentence)) >= 3:
                seen.add(sentence)
                requests.append(_Statement(sentence, index, key_terms(sentence)))
            elif _is_approval(sentence):
                seen.add(sentence)
                own = key_terms(sentence)
                words = {t for t in own if not (len(t) == 1 and _CJK.match(t))}
                refers = len(words) <= 2 or _DEICTIC.search(sentence)
                terms = own | key_terms(proposal) if proposal and refers and len(text) <= 60 else own
                approvals.append(_Statement(sentence, index, terms, own))
    return constraints, approvals, requests


def _user_statements(messages: Sequence[dict[str, Any]]) -> tuple[list[_Statement], list[_Statement]]:
    """(constraints, approvals) said by users in ``messages`` (see :func:`_user_turns`)."""
    constraints, approvals, _ = _user_turns(messages)
    return constraints, approvals


def _corpus(messages: Iterable[dict[str, Any]]) -> str:
    return "\n".join(_corpus_parts(messages))


def _corpus_parts(messages: Iterable[dict[str, Any]]) -> list[str]:
    """Every message's text and tool-call arguments."""
    parts = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        parts.append(content_text(m))
        for call in m.get("tool_calls") or ():
            if isinstance(call, dict):
                parts.append(call_arguments(call))
    return parts


def _sentences_said(messages: Sequence[dict[str, Any]], roles: tuple[str, ...]) -> Iterator[tuple[int, str]]:
    """(index, sentence) for each sentence of the messages of ``roles`` (no earlier summary): a long text by its
    head and tail, as the checks read the originals."""
    for index, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") in roles and not is_summary_message(m):
            for sentence in split_sentences(windowed(content_text(m), 6_000, 4_000)):
                yield index, sentence


def _calls(messages: Sequence[dict[str, Any]]) -> list[tuple[int, str, str]]:
    """(index, the call's name and arguments, its result) of every tool call in ``messages``."""
    results = {
        m.get("tool_call_id"): content_text(m)
        for m in messages
        if isinstance(m, dict) and m.get("role") == "tool" and m.get("tool_call_id")
    }
    out = []
    for index, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        for call in m.get("tool_calls") or ():
            if isinstance(call, dict):
                name = str((call.get("function") or {}).get("name") or call.get("name") or "")
                out.append((index, f"{name} {call_arguments(call)[:2_000]}", results.get(call.get("id"), "")))
    return out


def _written_paths(message: dict[str, Any]) -> set[str]:
    """The files a message's tool calls write (``write_file`` / ``edit_file`` with a ``path``)."""
    out = set()
    for call in message.get("tool_calls") or ():
        if not isinstance(call, dict):
            continue
        function = call.get("function") or {}
        name = str(function.get("name") or "")
        if not re.search(r"write|edit|patch|create|replace|apply", name, re.I):
            continue
        try:
            args = json.loads(call_arguments(call))
        except ValueError:
            continue
        path = args.get("path") or args.get("file_path") or args.get("filename") if isinstance(args, dict) else None
        if isinstance(path, str) and "/" in path and "." in path.rsplit("/", 1)[-1]:
            out.add(path)
    return out


# ---------------------------------------------------------------- checks


def _finding(kind: str, c: _Statement, summary: str, code: str, severity: str = "high") -> DriftFinding:
    return DriftFinding(kind, severity, {"original": c.text, "summary": summary}, c.index, code)


def _negates(s: _Statement, terms: set[str], cue: re.Pattern[str] | None = None) -> bool:
    """Whether ``s`` negates what ``terms`` describe: a negation in the clause that holds some of them.

    ``cue``: the negation pattern (default: any negation or restriction cue).
    """
    test = cue.search if cue is not None else is_negated
    if not s.clauses:
        return bool(test(s.text))
    return any(test(c.text) and c.terms & terms for c in s.clauses)


def _whole(s: _Statement) -> list[_Clause]:
    """The clauses of ``s`` (the sentence itself when it has one)."""
    if s.clauses:
        return s.clauses
    text = s.text
    return [
        _Clause(text, s.terms, is_negated(text), bool(_HEDGE_KEPT.search(text)), _is_request(text), _done_actions(text))
    ]


# a prohibition for now ("not yet", "first", "先", "暂时") ...
_TEMPORAL = re.compile(r"\b(?:yet|first|for\s+now|until|before|wait)\b|先|暂时|暂不|之前|等", re.I)
# ... is kept by a summary that names what it waits for ("after reviewing", "once ops confirms", "等用户确认后")
_WAIT_KEPT = re.compile(
    r"\b(?:after|once|as\s+soon\s+as|following)\s+(?!(?:it'?s|we'?re|you'?re|everything\s+is|ready)\b)\w+"
    r"|等.{1,16}(?:之后|以后|后|再)|(?:审查|确认|评审|批准|review|看过|看完)(?:之后|以后|后)",
    re.I,
)


_FACT_ONLY = re.compile(
    r"\b(?:qualif(?:y|ies|ied)|eligible|entitled|would\s+be|is\s+possible|can\s+be|could\s+be)\b|符合|有资格|可以申请",
    re.I,
)


def _inverts(c: _Statement, s: _Statement, strict: float, restated: bool) -> bool:
    """Whether ``s`` states the action of ``c`` without its negation (the whole sentence, or one clause of it)."""
    if c.text in s.text:  # the constraint restated verbatim (a summary quoting the user's turn) inverts nothing
        return False
    # "don't commit yet, I want to look at the diff first" -> "commit after the review": the wait is kept
    if _TEMPORAL.search(c.text) and _WAIT_KEPT.search(s.text) and not _SOFT.search(s.text):
        return False
    action = c.action
    verbs = c.verbs
    objects = action - (action & _VERBS) | c.anchors
    # the forbidden action named only in hedged or negated clauses, or in facts about its object ("concerned about
    # a possible refund of K1NW8N, which was cancelled by the airline", "…, and Ivan D-0 qualifies for a full
    # refund"): the other clause's "cancelled" requests no refund
    holding = [clause for clause in s.clauses if (verbs or action) & _expand(clause)]
    only_hedged = bool(holding) and all(
        clause.hedged or clause.negated or _FACT_ONLY.search(clause.text) for clause in holding
    )
    if (
        not only_hedged
        and _overlap(action, s.terms) >= strict
        and (not objects or _overlap(objects, s.terms) >= MATCH)  # not the verb alone: "订 A 座" vs "订了 B-502"
        and not _negates(s, action)
        # a fact about the object ("Ivan qualifies for a full refund") is no request to do it
        and (_is_request(s.text) or (not restated and not _FACT_ONLY.search(s.text)))
    ):
        return True
    # one clause reports the action as done or requested, whatever the other clauses negate; there any change
    # ("added a retry to ci.yml") breaks a "don't touch", and the identifiers name the object well enough
    needed = 1.0 if len(objects) <= 3 else INVERT_MATCH
    for clause in _whole(s):
        if not clause.request or clause.negated or clause.hedged or _FACT_ONLY.search(clause.text):
            continue
        terms = _expand(clause)
        if not verbs <= terms:
            continue
        if (objects and _overlap(objects, terms) >= needed) or (verbs and c.anchors and c.anchors <= terms):
            return True
    return False


_NEGATION_THEN = re.compile(
    r"(?:\b(?:not|never|don'?t|do\s+not|doesn'?t|mustn'?t|shouldn'?t|cannot|can'?t|avoid|without)\b"
    r"|不要|不许|不准|不能|不得|不可以|" + _BIE + r"|禁止|严禁|勿)(?P<rest>.{0,24})",
    re.I,
)


def _negated_verbs(text: str) -> set[str]:
    """The action a prohibition forbids: the first verb after its negation ("先不要修改部署脚本" -> 修改, not 部署)."""
    for m in _NEGATION_THEN.finditer(_normalize(text)):
        rest = m.group("rest")
        for term in re.findall(r"[A-Za-z]+|修改|删除|引入|部署|执行|重启|回滚|替换|停用|创建|发送|预订|承诺", rest):
            verb = term if _CJK.match(term) else _stem(term.lower())
            if verb in _VERB_WORDS:
                return {verb}
    return set()


_CLOCK_BOUND = re.compile(r"\b(?:until|before)\s+\d{1,2}(?::\d{2})?(?!\w)|\d{1,2}[:：]\d{2}\s*(?:之前|以前)")


def _forbidden_terms(c: _Statement) -> set[str]:
    """The terms of what a prohibition forbids that its other clauses (the reasons) do not also use."""
    clauses = _clauses(c.text)
    # "finance runs their closing reports on it until 18:00": a clock time bounds nothing in a reason
    reasons = set().union(*(_terms(clause)[0] for clause in clauses if not is_negated(_CLOCK_BOUND.sub(" ", clause))))
    return (c.action - reasons) or c.action


_PART = re.compile(r"\band\b|[,;，；]|并且|而且")


def _part_negates(text: str, terms: set[str]) -> bool:
    """Whether a part of ``text`` (split at "and", commas) holds a negation and some of ``terms``."""
    return any(is_negated(part) and _terms(part)[0] & terms for part in _PART.split(text))


def _negates_part(s: _Statement, terms: set[str]) -> bool:
    """:func:`_negates`, where the negation and the terms share one part of a clause: "tested on business hours
    and finance runs reports until 18:00" negates no business hours."""
    return _negates(s, terms) and any(_part_negates(clause.text, terms) for clause in _whole(s))


def _restates(c: _Statement, s: _Statement, own: set[str]) -> bool:
    """Whether a negated clause of ``s`` is about ``c`` (mostly its words, not only its verb): "signature kept".
    ``own``: the terms of what ``c`` forbids (:func:`_forbidden_terms`), one of which the clause must hold."""
    for clause in _whole(s):
        common = clause.terms & c.terms & own
        if not _part_negates(clause.text, own):
            continue
        if clause.negated and common - _VERBS and _overlap(clause.terms, c.terms) >= MATCH:
            return True
    return False


@lru_cache(maxsize=4096)
def _hay(text: str) -> frozenset[str]:
    """What a text offers a statement in the other language: its bridge terms, and its English words."""
    bridge = bridge_terms(text)
    return frozenset(bridge if is_chinese(text) else bridge | key_terms(text))


@lru_cache(maxsize=4096)
def _needle(text: str) -> frozenset[str]:
    return frozenset(bridge_terms(text))


def _cross(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are in different languages (Chinese and English)."""
    return is_chinese(a) != is_chinese(b)


def _x_about(needle: frozenset[str], s: _Statement) -> bool:
    """A sentence in the other language about the statement whose bridge terms are ``needle``."""
    return _x_about_text(needle, s.text)


def _x_about_text(needle: frozenset[str], text: str) -> bool:
    common = needle & _hay(text)
    return len(common) >= min(2, len(needle)) and _overlap(set(needle), set(common)) >= MATCH


def _x_negates(s: _Statement, needle: frozenset[str], cue: re.Pattern[str] | None = None) -> bool:
    test = cue.search if cue is not None else is_negated
    return any(test(clause.text) and needle & _hay(clause.text) for clause in _whole(s))


def _with_files(hay: set[str], needle: set[str]) -> set[str]:
    """``hay``, plus the scripts of ``needle`` it names in words: "the deploy script" names ``deploy.sh``."""
    for term in needle:
        name, dot, ext = term.rpartition(".")
        if dot and ext in ("sh", "bash", "ps1") and "script" in hay and _stem(name.rsplit("/", 1)[-1]) in hay:
            hay.add(term)
    return hay


def _core_text(sentence: str) -> str:
    """The clauses of a constraint that carry it, without their conditions (see :func:`core_terms`)."""
    clauses = [c for part in _clauses(sentence) for c in _CONDITION.split(part) if c.strip()]
    carrying = [c for c in clauses if _is_constraint(c)]
    carrying = [c for c in carrying if _is_prohibitive(c)] or carrying
    if len(clauses) < 2 or not carrying or len(carrying) == len(clauses):
        return sentence
    return "，".join(carrying)


def _x_inverts(c: _Statement, s: _Statement) -> bool:
    """``s``, in the other language, states the forbidden action of ``c`` as requested, planned or done:
    its verb and (nearly) all its objects, by concept, number and identifier."""
    action = _needle(_core_text(c.text))
    verbs = {_BRIDGE_EN.get(v, v) for v in c.verbs} | {
        concept for v in c.verbs for pattern, concept in _BRIDGE_ZH if _CJK.match(v) and pattern.search(v)
    }
    # (a verb the word lists do not know, by its concept: "不要取消 #W1192604", "don't cancel my flight")
    verbs = {v for v in verbs if v.isascii()} or set(action & _VERB_CONCEPTS)
    objects = set(action) - verbs - _VERB_CONCEPTS
    if not verbs or not objects:
        return False
    for clause in _whole(s):
        if clause.negated or clause.hedged or not clause.request:
            continue
        hay = _with_files(set(_hay(clause.text)), objects)
        if clause.done & (_WRITE_EN | _WRITE_ZH):
            hay.add("modify")
        if verbs <= hay and _overlap(objects, hay) >= (1.0 if len(objects) <= 2 else INVERT_MATCH):
            return True
    return False


def _echo_index(prose: list[_Statement], messages: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Which prose sentences repeat an assistant's sentence nearly word for word, and from which message."""
    said = [
        (index, key_terms(t))
        for index, m in enumerate(messages)
        if isinstance(m, dict) and m.get("role") == "assistant"
        for t in split_sentences(windowed(content_text(m), 6_000, 4_000))
    ]
    out: dict[str, int] = {}
    for s in prose:
        if len(s.terms) < 4:
            continue
        hit = next((i for i, t in said if _overlap(s.terms, t) >= 0.8 and _overlap(t, s.terms) >= 0.8), None)
        if hit is not None:
            out[s.text] = hit
    return out


# an object said to be as it was: what a prohibition on changing it leaves
_KEPT_STATE = re.compile(
    r"\b(?:unchanged|untouched|intact|left\s+(?:alone|as\s+is)|as\s+it\s+was|not\s+(?:been\s+)?(?:changed|touched"
    r"|modified|cancell?ed))\b|不变|保持原样|没动|未动|没有改|未改|未修改",
    re.I,
)


def _check_constraint(
    c: _Statement, prose: list[_Statement], pinned: str, summary: str, echoes: dict[str, int] | None = None
) -> DriftFinding | None:
    """``echoes``: prose sentence -> the archived message it repeats (see :func:`_echo_index`)."""
    if len(c.terms) == 0:
        return None
    bound = _check_bound(c, prose)
    if bound is not None:
        return bound
    if not _is_prohibitive(c.text):
        return _check_requirement(c, prose, pinned, summary)
    action = c.action
    about = [s for s in prose if _overlap(c.terms, s.terms) >= MATCH or _overlap(action, s.terms) >= INVERT_MATCH]
    # a negation kept is one about the forbidden action, not about the reason given for it: "finance runs
    # their closing reports on it until 18:00" does not keep "don't restart report-worker during business hours"
    own = _forbidden_terms(c)
    negated = [s for s in about if _negates_part(s, own)] or [s for s in prose if _restates(c, s, own)]
    # "the return HAT211 on May 22 is unchanged" keeps "don't cancel my return flight": its object said intact
    objects = own - _VERBS
    negated += [
        s for s in prose if objects & s.terms and _KEPT_STATE.search(s.text) and not _NOT_A_CLAIM.search(s.text)
    ]
    if _TEMPORAL.search(c.text):  # "commit after the review" keeps "don't commit yet"
        negated += [s for s in about if _WAIT_KEPT.search(s.text) and not _SOFT.search(s.text)]
    needle = _needle(_core_text(c.text))
    other = [s for s in prose if _cross(c.text, s.text)]
    negated += [s for s in other if _x_about(needle, s) and _x_negates(s, needle)]
    strict = 1.0 if len(action) <= 3 else INVERT_MATCH
    for s in prose:
        # stated without its negation, as requested/planned/done: inverted, whatever else the summary says
        if c.index is not None and echoes and echoes.get(s.text, 1 << 30) < c.index:
            continue  # it repeats what happened before the user said so: history, not an inversion
        if _inverts(c, s, strict, bool(negated)) or _x_inverts(c, s):
            code = "soft_inversion" if _SOFT.search(s.text) else "negation_missing"
            return _finding("constraint_inverted", c, s.text, code)
    if c.text in summary or negated:
        return None
    if pinned and c.text in pinned:
        return None
    # "先别下结论", "don't worry": no action and nothing named, a note
    vague = not (c.anchors or (_needle(c.text) & _VERB_CONCEPTS) or c.verbs)
    return _finding("constraint_dropped", c, "", "not_restated", "low" if vague else "high")


def _command_kept(command: str, text: str) -> bool:
    """Whether ``text`` has ``command`` (its words, flags aside, on one line)."""
    words = [w for w in command.split() if not w.startswith("-")] or command.split()
    return any(all(w in line for w in words) for line in text.splitlines())


def _limit_numbers(text: str) -> set[str]:
    """The numbers of a limit ("≤ 40 lines", "最多重试三次": 3), as :func:`bridge_terms` writes them: those of the
    clauses that set it ("Hold on with the real run, let me ask finance … for 10 minutes" sets no limit of 10)."""

    def sets_limit(clause: str) -> bool:
        return bool(
            _BOUND.search(clause)
            or _STANDING.search(clause)
            or re.search(r"最多|不超过|以内|上限|at\s+most|no\s+more", clause)
        )

    if not sets_limit(text):
        return set()
    limits = [c for c in _clauses(text) if sets_limit(c)] or [text]
    return {t for c in limits for t in bridge_terms(c) if t.replace(".", "").isdigit()}


def _check_standing(c: _Statement, prose: list[_Statement], summary: str) -> DriftFinding | None:
    """A standing instruction keeps its command ("run `pytest tests/export -q` after every change": the summary
    names the command), and a limit its number ("≤ 40 lines", "最多重试三次")."""
    if c.text in summary:
        return None
    for command in _COMMAND.findall(c.text):
        if not _command_kept(command, summary):
            return _finding("constraint_dropped", c, "", "command_dropped")
    numbers = _limit_numbers(c.text)
    if numbers:
        # the number, said of the same thing (one shared word is enough: the number is the strong part), not
        # a digit of an address, a timestamp or a version ("10.0.3.17:6379" holds no limit of 3)
        words = (set(_needle(c.text)) | c.terms) - numbers
        lines = [_NUMBERED_NAME.sub(" ", line) for line in summary.splitlines()]
        if not any(numbers & _needle(line) and (not words or words & (_hay(line) | key_terms(line))) for line in lines):
            return _finding("constraint_dropped", c, "", "limit_dropped")
    return None


# a token with a digit and a letter, colon, slash or underscore: an address, a stamp, a version, an id
_NUMBERED_NAME = re.compile(
    r"[^\s`'\"()\[\]]*(?:\d[^\s`'\"()\[\]]*[A-Za-z_/:]|[A-Za-z_/:][^\s`'\"()\[\]]*\d)[^\s`'\"()\[\]]*", re.ASCII
)


#: the words of how a request is asked, not of what it asks
_ASK_FILLER = frozenset({"can", "could", "would", "please", "while"})


def _check_request(r: _Statement, prose: list[_Statement], summary: str) -> DriftFinding | None:
    """A request made mid-run that the summary does not mention (done or still to do)."""
    if r.text in summary:
        return None
    # the ask, without its reasons ("顺便把日志级别改成 INFO | 现在 DEBUG 日志太多了")
    ask = _clauses(r.text)[0] if len(_clauses(r.text)) > 1 and len(_content_words(_clauses(r.text)[0])) >= 2 else r.text
    needle = _needle(ask)
    terms, ids = _terms(ask)
    # it names what it is about: "工单 OPS-2291 已创建"; all of it, or some and the ask's action ("rename
    # fmt_money to format_money" is not kept by "fmt_money formats the totals"); one name, with what is asked of
    # it ("查一下 #W7730285 的物流" is not kept by "#W7730285 的退货已提交")
    whole = {i for i in ids if re.search(r"[_./\d-]", i)} or ids
    verbs = (needle - whole) & _VERB_CONCEPTS
    plain = _NAME_TOKEN.sub(" ", ask)
    asked = {t for t in _needle(plain) if not t.isdigit()}
    if not is_chinese(ask):  # its words too: "prepare the helm values diff" is kept by "preparing Helm values"
        asked |= key_terms(plain) - _VERBS - {"can", "could", "would", "please", "meanwhile", "also"}

    def keeps(s: _Statement) -> bool:
        if whole <= s.terms:
            return len(whole) > 1 or not asked or bool(asked & (_hay(s.text) | key_terms(s.text)))
        return bool(whole & s.terms) and (not verbs or bool(verbs & _hay(s.text)))

    if whole and any(keeps(s) for s in prose):
        return None
    # its other words, when it has some: "can you … while you're at it" says nothing of what is asked
    rest = {t for t in terms - _VERBS - ids if len(t) > 2 or _CJK.match(t)} - _ASK_FILLER
    for s in prose:
        if _cross(r.text, s.text):
            if _x_about(needle, s):
                return None
        elif len(rest) >= 2 and _overlap(rest, s.terms) >= MATCH:  # (the names were looked at above)
            return None
    # a question to look something up ("check which architecture the runner uses") is answered, not kept: a note
    lookup = re.match(
        r"\W*(?:(?:also|and|btw)\W+)?(?:can\s+you\s+|could\s+you\s+|please\s+)?(?:check|look|find|see)\b"
        r"|\W*(?:顺便|另外|还有)?(?:帮我|麻烦你?|请)?(?:查一下|看一下|查查|看看|查下|看下)",
        ask,
        re.I,
    )
    return _finding("constraint_dropped", r, "", "request_dropped", "low" if lookup else "medium")


def _check_requirement(c: _Statement, prose: list[_Statement], pinned: str, summary: str) -> DriftFinding | None:
    """A positive constraint ("only use staging", "必须先备份"): inverted only when the summary negates it."""
    standing = _check_standing(c, prose, summary)
    if standing is not None:
        return standing
    core = c.action
    about = [s for s in prose if _overlap(c.terms, s.terms) >= MATCH or _overlap(core, s.terms) >= INVERT_MATCH]
    needle = _needle(c.text)
    about += [s for s in prose if _cross(c.text, s.text) and _x_about(needle, s)]
    for s in prose:
        negates = _overlap(core, s.terms) >= INVERT_MATCH and _negates(s, core, _HARD_NEG)
        # or a negated clause that is all about the requirement ("不再保留兼容层" for "必须保留兼容层 ...")
        negates = negates or any(
            _is_hard_negation(clause.text)
            and len(clause.terms) >= 3
            and _overlap(clause.terms, core) >= INVERT_MATCH
            and (bool(c.anchors & s.terms) if c.anchors else len(clause.terms) >= 4)
            for clause in _whole(s)
        )
        if (negates and not _OUTCOME.search(s.text) and not _WITHOUT_LEAVE.search(s.text)) or _widens(c, s):
            return _finding("constraint_inverted", c, s.text, "requirement_negated")
    if c.text in summary or (pinned and c.text in pinned):
        return None
    if not about:
        return _finding("constraint_dropped", c, "", "not_restated")
    if _SCOPE.search(c.text) and not _restricts(c, about, prose):
        # "staging only" is not kept by "ran the migration on staging": the restriction itself is gone
        return _finding("constraint_dropped", c, "", "restriction_dropped", "medium")
    return None


#: a prohibition that waits for someone's leave ("do not run the migration on staging without permission",
#: "未经批准不要迁移"): it holds the action back, and negates no requirement on where or how it runs
_WITHOUT_LEAVE = re.compile(
    r"\bwithout\s+(?:\w+\s+){0,2}(?:permission|approval|consent|confirmation|sign-?off|go-?ahead|asking)\b"
    r"|未经(?:\S{0,4})?(?:同意|批准|允许|确认)",
    re.I,
)


def _restricts(c: _Statement, about: list[_Statement], prose: list[_Statement]) -> bool:
    """Whether the summary keeps the restriction ``c``: a sentence about it restricts (a cue inside a quoted
    command restricts nothing: "`helm history payments-api --max 10`"; nor does an outcome: "was not applied on
    staging because of a lock timeout"), or one forbids the scope it leaves out."""
    if any(
        is_negated(_CODE_SPAN.sub(" ", clause.text)) and not _OUTCOME.search(clause.text)
        for s in about
        for clause in _whole(s)
    ):
        return True
    return any(_complement_negated(c, s) for s in prose)


# a restriction to one scope: "staging only", "only touch the tests", "只动预发", "仅限退款" (not "only one left",
# "只有", "只是": the shared cues already leave those out of the constraints)
_SCOPE = re.compile(
    r"\b(?:only|solely|exclusively)\b|(?<![一两三几每])只(?!是|有|要|好|不过|见|剩|会)[\u4e00-\u9fff]|仅限?", re.I
)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
#: the scope a restriction leaves out, by concept: "staging only" is kept by "never production"
_COMPLEMENT = {"stag": "prod", "test": "prod"}


def _complement_negated(c: _Statement, s: _Statement) -> bool:
    """``s`` forbids what the restriction ``c`` leaves out ("nothing on production" for "staging only")."""
    left_out = {_COMPLEMENT[t] for t in _needle(c.text) if t in _COMPLEMENT}
    return bool(left_out & _hay(s.text)) and _is_hard_negation(s.text)


_HARD_NEG = re.compile(_HARD_NEG_EN.pattern + "|" + _HARD_NEG_ZH.pattern, re.I)
_BOUND = re.compile(
    r"(?P<min>at\s+least|no\s+(?:fewer|less)\s+than|minimum\s+of"
    r"|(?:not|never)\s+(?:\w+\s+){0,4}?(?:below|under|fewer\s+than|less\s+than)"
    r"|(?:至少|不少于|不低于|不能低于|不得低于|不能少于|不得少于)[\u4e00-\u9fff]{0,2})\s*(?P<low>\d+(?:\.\d+)?)"
    r"|(?P<max>at\s+most|no\s+more\s+than|up\s+to|maximum\s+of|max"
    r"|(?:not|never)\s+(?:\w+\s+){0,4}?(?:above|over|exceed\w*|more\s+than)"
    r"|(?:最多|不超过|不高于|不能超过|不得超过|上限)[\u4e00-\u9fff]{0,2})\s*(?P<high>\d+(?:\.\d+)?)",
    re.I,
)
_CHANGE_TO = re.compile(
    r"(?:降|缩|减|调|改|设|提|升|增|加|扩|变)[容少整置高低]?(?:到|至|为|成)\s*了?\s*(\d+(?:\.\d+)?)"
    r"|\b(?:to|at|down\s+to)\s+(\d+(?:\.\d+)?)\b",
    re.I,
)


_EXACT = re.compile(
    r"\b(?:keep|leave)\s+(?:the\s+)?[\w-]+(?:\s+[\w-]+)?\s+at\s+(?P<a>\d+(?:\.\d+)?)"
    r"|\b(?:stays?|remains?)\s+at\s+(?P<b>\d+(?:\.\d+)?)|(?:保持|维持|固定)[在为]?\s*(?P<c>\d+(?:\.\d+)?)",
    re.I,
)
_WINDOW = re.compile(r"(\d{1,2}):(\d{2})\s*(?:-|–|~|到|至|\bto\b)\s*(\d{1,2}):(\d{2})")
_CLOCK = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2})(?![\d:])")


def _past_limit(clause: str, value: float) -> bool:
    """Whether ``value`` breaks the limit stated in ``clause`` (at least / at most / exactly N)."""
    bound = _BOUND.search(clause)
    if bound is not None:
        limit = float(bound.group("low") or bound.group("high"))
        return value < limit if bound.group("low") else value > limit
    exact = _EXACT.search(clause)
    return exact is not None and value != float(exact.group("a") or exact.group("b") or exact.group("c"))


def _check_bound(c: _Statement, prose: list[_Statement]) -> DriftFinding | None:
    """A number past a limit the user set ("never below 3 replicas" -> "副本数临时降到了 2 个", "keep the TTL
    at 300" -> "TTL lowered to 60"), or the forbidden action done inside a forbidden time window."""
    for clause in _clauses(c.text):
        if not (_BOUND.search(clause) or _EXACT.search(clause)):
            continue
        subject = {t for t in key_terms(clause) if len(t) > 1 and not t[0].isdigit()} - _VERB_WORDS - {"modify"}
        for s in prose:
            for part in _whole(s):
                if part.negated or not part.terms & subject:
                    continue
                for change in _CHANGE_TO.finditer(part.text):
                    if _past_limit(clause, float(change.group(1) or change.group(2))):
                        return _finding("constraint_inverted", c, s.text, "limit_exceeded")
    window = _WINDOW.search(c.text)
    if window is None or not _is_prohibitive(c.text):
        return None
    start = int(window.group(1)) * 60 + int(window.group(2))
    end = int(window.group(3)) * 60 + int(window.group(4))
    verbs = _negated_verbs(c.text)
    for s in prose:
        for part in _whole(s):
            if part.negated or not (part.done & verbs if verbs else part.done):
                continue
            for clock in _CLOCK.finditer(part.text):
                if start <= int(clock.group(1)) * 60 + int(clock.group(2)) < end:
                    return _finding("constraint_inverted", c, s.text, "window_violated")
    return None


_ONLY = re.compile(
    r"\bonly\s+([a-z]+)|(?:只|仅)(?:能|可以)?(修改|删除|引入|部署|执行|重启|回滚|替换|[\u4e00-\u9fff]{2})", re.I
)
_ALSO = re.compile(r"\b(?:as\s+well|too|also)\b|也|一并|同时|连同|顺便|顺手", re.I)


def _widens(c: _Statement, s: _Statement) -> bool:
    """An "only X" requirement whose action the summary reports done beyond X ("... and in notebooks/ as
    well", "未验证的也一并同步了")."""
    m = _ONLY.search(_normalize(c.text))
    if m is None:
        return False
    verb = m.group(2) or _stem(m.group(1).lower())
    return any(
        _ALSO.search(clause.text) and not clause.negated and clause.request and verb in _expand(clause)
        for clause in _whole(s)
    )


_ACK_WORDS = frozenset(
    {_stem(w) for w in ["sound", "sounds", "good", "ok", "okay", "fine", "great", "thanks", "yes", "sure"]}
    | set("好的行嗯")
)


#: a sentence that reports how an action turned out ("was not applied because of a lock timeout", "编号不对"):
#: the action failed, nobody refused or reversed the approval or the requirement
_OUTCOME = re.compile(
    r"\bbecause\b|\bdue\s+to\b|\bfail(?:s|ed|ure)?\b|\btimed?\s*out\b|\btimeout\b|\berror\b"
    r"|因为|由于|失败|报错|出错|不对|超时",
    re.I,
)


def _beyond_names(needle: frozenset[str], text: str) -> bool:
    """Whether ``text`` shares with ``needle`` more than the words of the identifiers and paths it names."""
    names = _identifiers(text) | set(find_paths(text))
    return bool(needle & _hay(text) - _hay(" ".join(names))) if names else True


def _grants(s: _Statement) -> bool:
    """A clause of ``s`` states the approval ("approved, but not executed yet": the wait is for something else)."""
    return len(_whole(s)) > 1 and any(_is_approval(c.text) and not _PENDING.search(c.text) for c in _whole(s))


def _check_approval(a: _Statement, prose: list[_Statement], summary: str) -> DriftFinding | None:
    if not a.terms:
        return None
    own = a.core or a.terms
    # a short approval borrows the proposal's words; the proposal's identifiers say what a line is about best
    # ("确认，就退这件吧。" to the return of 6117428830: "已提交退货：#W7730285 的机械键盘（6117428830）…")
    named = {t for t in a.terms - own if len(t) >= 5 and any(ch.isdigit() for ch in t)}
    about = [
        s
        for s in prose
        if _overlap(a.terms, s.terms) >= MATCH or _overlap(own, s.terms) >= INVERT_MATCH or (named and named <= s.terms)
    ]
    needle = _needle(a.text)
    # a line that only names the approved thing ("- migrations/0057_split_orders.sql") keeps no approval
    other = [s for s in prose if _cross(a.text, s.text) and _x_about(needle, s) and _beyond_names(needle, s.text)]
    # the same language, by concept too: "run a migration on staging" is about "approve running 0042_add_index"
    same = [s for s in prose if not _cross(a.text, s.text) and len(needle) >= 3 and _x_about(needle, s)]
    # a bare "行。" / "OK" borrows its terms from the proposal: only a sentence about the permission refuses it
    bare = not (a.core or a.terms) - _ACK_WORDS
    if a.text not in summary and not _PENDING.search(a.text):
        for s in about if not bare else [s for s in about if _PERMISSION.search(s.text)]:
            # "not approved", "still waiting for the user's approval", "用户还没确认要不要订"
            if _negates(s, a.terms, _PENDING) and not _grants(s) and not _OUTCOME.search(s.text):
                return _finding("constraint_inverted", a, s.text, "approval_refused")
        for s in other + same:
            if _x_negates(s, needle, _PENDING) and not _grants(s) and not _OUTCOME.search(s.text):
                return _finding("constraint_inverted", a, s.text, "approval_refused")
    # a sentence that only mentions the approved thing ("0042_add_index is causing lock timeouts") keeps no
    # approval: it says it was given, asked for, planned, done, or how it turned out, or it states the approved
    # action ("拆分 calc_tax 为两个函数" for "把 calc_tax 拆成两个函数吧，我同意")
    # (without the names: "0042_add_index" names a migration, it does not add or run one)
    action = _needle(_NAME_TOKEN.sub(" ", a.text)) & _VERB_CONCEPTS
    about = [
        s
        for s in about + same
        if _is_approval(s.text) or _is_request(s.text) or _OUTCOME.search(s.text) or action & _hay(s.text)
    ]
    about += other
    if a.text in summary or about:
        return None
    # "Sounds good." to a plan is an acknowledgement more than a permission: a note
    ack = not (a.core or set()) - _ACK_WORDS
    return _finding("constraint_dropped", a, "", "approval_lost", "low" if ack else "medium")


# a token that names something: it holds an underscore, a digit, or a dot or slash inside ("0042_add_index",
# "deploy.sh", "libxml2"; not "headers.")
_NAME_TOKEN = re.compile(r"(?<![\w./-])(?:[\w-]+(?:[./][\w-]+)+|[\w-]*_[\w-]*|[\w-]*\d[\w-]*)", re.ASCII)

_NO_RULES = re.compile(
    r"\bpinned\s+facts\b|\bno\s+(?:specific\s+|other\s+|explicit\s+|particular\s+)?"
    r"(?:constraints?|preferences?|rules?|prohibitions?|restrictions?|limits?|approvals?|instructions?)\b"
    r"|没有(?:特别的|具体的|明确的|其他)?(?:约束|限制|要求|禁止|批准)",
    re.I,
)


_PERMISSION = re.compile(
    r"\b(?:approv\w*|permission|permit\w*|consent\w*|confirm\w*|agree\w*)\b|批准|同意|确认|授权|允许", re.I
)
_ALLOWED = re.compile(r"\b(?:allow(?:s|ed)?|permitted)\s+to\b|允许|准许", re.I)


def _rule_sentences(prose: str) -> set[str]:
    """The sentences under a constraints heading ("## Constraints and preferences"): rules by where they stand."""
    out: set[str] = set()
    inside = False
    for line in prose.splitlines():
        if line.lstrip().startswith("#"):
            inside = bool(re.search(r"constraint|约束|限制", line, re.I))
            continue
        if inside:
            line = re.sub(r"^\s*(?:[-*]\s+|\d+[.)]\s+)", "", line.strip())
            out.update(split_sentences(line))
    return out


#: a wish put on the user: "The user wants to cancel an order", "用户希望在收到退货后立即到账"
_USER_WISH = re.compile(
    r"\b(?:the\s+)?user\s+(?:also\s+)?(?:wants?|wanted|would\s+like|prefers?|preferred|insists?|insisted|expects?"
    r"|expected|believes?|believed)\b|用户(?:也|还)?(?:希望|想要|想|坚持|期望|认为)",
    re.I,
)


def _check_wishes(messages: Sequence[dict[str, Any]], prose: list[_Statement]) -> list[DriftFinding]:
    """A wish or belief put on the user that no user turn says anything like, in the user's own language."""
    users: list[str] | None = None
    findings = []
    for s in prose:
        wish = _USER_WISH.search(s.text)
        if wish is None:
            continue
        content = s.text[wish.end() :]
        terms = key_terms(content) - _VERBS
        if len(_content_words(content)) < 2:
            continue
        if users is None:
            users = [
                sentence
                for m in messages
                if isinstance(m, dict) and m.get("role") == "user" and not is_summary_message(m)
                for sentence in split_sentences(user_statement_text(content_text(m)))
            ]
        # across languages the words differ: no judgement there
        if not users or any(_cross(content, u) for u in users):
            continue
        if max(_overlap(terms, key_terms(u)) for u in users) < 0.2:
            findings.append(
                DriftFinding(
                    "constraint_fabricated", "medium", {"original": "", "summary": s.text}, None, "wish_unsourced"
                )
            )
    return findings


def _check_fabricated(
    prose: list[_Statement],
    pinned: str,
    constraints: list[_Statement],
    approvals: list[_Statement],
    corpus: str,
    rules: frozenset[str] = frozenset(),
) -> list[DriftFinding]:
    findings = []
    given = constraints + approvals
    for s in prose:
        # under a constraints heading a prohibition needs no "the user said" ("The tool should not apply X")
        attributed = _ATTRIBUTION.search(s.text) or (
            s.text in rules and _is_prohibitive(s.text) and not _NO_RULES.search(s.text)
        )
        claims_constraint = (_is_constraint(s.text) or _CLAIM_EXTRA.search(s.text)) and attributed
        if _NO_RULES.search(s.text):  # "约束与批准见 Pinned facts": a pointer, no rule
            continue
        granted = _is_approval(s.text) or bool(_ALLOWED.search(s.text))
        claims_approval = granted and (_ATTRIBUTION.search(s.text) or s.text in rules) and not is_negated(s.text)
        if not (claims_constraint or claims_approval) or len(s.terms) < 2:
            continue
        if any(_overlap(s.terms, g.terms) >= MATCH or _overlap(g.terms, s.terms) >= MATCH for g in given):
            continue
        other = [g for g in given if _cross(s.text, g.text)]
        restated = (_x_about(_needle(g.text), s) or _x_about(_needle(s.text), g) for g in other)
        if any(restated):
            continue
        if s.text in corpus or _quoted(s.text, corpus):
            continue
        findings.append(
            DriftFinding(
                "constraint_fabricated",
                "medium",
                {"original": "", "summary": s.text},
                None,
                "constraint_unsourced",
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
                    "pinned_unsourced",
                )
            )
    return findings


# a summary's label before what it quotes: "Finding (#280): ", "Next (#8): ", "(#71) resolved later (#164): "
_LABEL = re.compile(r"^\W*(?:[\w ]{0,30}\(#\d+\)[\w ]{0,30}(?:\(#\d+\))?\s*:\s*)")


#: an extractive call line, its result part in group 1 (named apart from the hedge check's ``_CALL_LINE``,
#: which has no group: sharing one name made ``_verbatim`` raise IndexError on such a line)
_CALL_QUOTE = re.compile(r"^\(?#?\d*\)?\s*\w+\(.*\):\s+(.+)$")


def _verbatim(text: str, corpus: str) -> bool:
    """Whether ``text``, without its label ("(#209) resolved later (#210): "), is a passage of ``corpus``."""
    body = _LINE_COUNT.sub("", _LABEL.sub("", text, count=1)).strip(" -.…")
    # the extractive summary's call lines: 'bash({"command": …}): Error: … (41 lines)' quote the result
    call = _CALL_QUOTE.match(body)
    body = call.group(1).strip(" -.…") if call else body
    return len(body) >= 20 and body in corpus


def _quoted(text: str, corpus: str) -> bool:
    """Whether ``text`` quotes a message after a label of its own ("Finding (#280): Since I don't have ...")."""
    body = _LABEL.sub("", text, count=1).rstrip(".…")
    return body != text and len(body) >= 20 and body in corpus


def _identifiers(text: str, *, strong_only: bool = False) -> set[str]:
    """Identifiers in ``text``: tickets, trains, versions, hashes, error codes; unless ``strong_only``,
    also paths, ``function()`` names and numbers with a unit ("800 元", "16MB")."""
    found = set(_STRONG_ID.findall(text))
    if strong_only:
        return found
    found.update(p for p in find_paths(text) if "/" in p and "." in p.rsplit("/", 1)[-1])
    found.update(_TEST_ID.findall(text))  # tests/export/test_money.py::case_4
    found.update(m.group(0) for m in _FUNCTION.finditer(text))
    found.update(m.group(0) for m in _QUANTITY.finditer(text))
    return found


def _has_number(text: str, number: str) -> bool:
    """Whether ``text`` holds ``number`` as a number of its own ("800" not in "1800" or "8.00"; "1284" as "1,284")."""
    forms = {number}
    whole, _, fraction = number.partition(".")
    if len(whole) > 3 and whole.isdigit():
        forms.add(f"{int(whole):,}" + (f".{fraction}" if fraction else ""))
    return any(re.search(rf"(?<![A-Za-z0-9_.,]){re.escape(f)}(?![0-9]|[.,][0-9])", text) for f in forms)


def _number_of(ident: str) -> str | None:
    m = _QUANTITY.fullmatch(ident)
    return (m.group(1) or m.group(2)).replace(",", "") if m else None


def _is_in(ident: str, text: str) -> bool:
    """Whether ``ident`` appears in ``text`` (a function by its name, a quantity by its number)."""
    function = _FUNCTION.match(ident)
    if function is not None and ident.endswith("()"):
        return function.group(1) in text
    number = _number_of(ident)
    if number is not None:
        return _has_number(text, number)
    if "/" in ident:  # a path whole: "tests/test_money.p" is not in "tests/test_money.py"
        return re.search(re.escape(ident) + r"(?![\w-]|\.\w)", text) is not None
    return ident in text


def _rooted(path: str, corpus: str) -> bool:
    """A known relative path under a known directory: "/srv/app/billing/tax.py" for "billing/tax.py" in /srv/app."""
    parts = path.split("/")
    for cut in range(1, len(parts) - 1):
        root, rest = "/".join(parts[:cut]), "/".join(parts[cut:])
        # the root named as a directory of its own ("working in /srv/app"), not as a prefix ("/v1/health")
        if root and "/" in rest and _is_in(rest, corpus) and re.search(re.escape(root) + r"(?![\w/-])", corpus):
            return True
    return False


#: a path whose first directories are in Chinese: "测试/billing/test_totals.py" (group 1: the rest)
_TRANSLATED_PATH = re.compile(r"[\u4e00-\u9fff]+/((?:[\w.-]+/)*[\w-]+\.[A-Za-z]\w*)", re.ASCII)


#: a tool result this short is one answer, not a log to skim: the digest or commit it returned is what was asked
_SHORT_RESULT = 160
_DIGEST = re.compile(rf"\b{_HEX}{{12,64}}\b")


def _check_identifiers(messages: Sequence[dict[str, Any]], summary: str, corpus: str) -> list[DriftFinding]:
    """Identifiers the originals gave that the summary lacks (notes: an identifier of a constraint too, whose own
    check says whether the constraint was dropped), and identifiers and numbers no original holds."""
    findings = []
    for index, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "tool" and len(content_text(m).strip()) <= _SHORT_RESULT:
            # a short result is the answer to its call ("sha256:4b8e…" for "look at the image digest"): a note
            for ident in sorted(set(_DIGEST.findall(content_text(m)))):
                if not _is_in(ident, summary):
                    findings.append(
                        DriftFinding(
                            "identifier_missing",
                            "low",
                            {"original": ident, "summary": ""},
                            index,
                            "tool_identifier_missing",
                        )
                    )
        if not isinstance(m, dict) or is_summary_message(m) or m.get("role") not in ("user", "assistant"):
            continue
        # what users gave, and the tickets/versions/error codes the assistant reported (tool output is not read)
        by_user = m.get("role") == "user"
        text = user_statement_text(content_text(m)) if by_user else windowed(content_text(m), 6_000, 4_000)
        ids = _identifiers(text, strong_only=not by_user)
        if not by_user:  # the files the assistant named ("also imported by scripts/backfill_2025.py") or wrote
            ids |= {p for p in find_paths(text) if "/" in p and "." in p.rsplit("/", 1)[-1] and not p.startswith("/")}
            ids |= _written_paths(m)
        for ident in sorted(ids):
            if not _is_in(ident, summary):
                findings.append(
                    DriftFinding(
                        "identifier_missing",
                        "low",
                        {"original": ident, "summary": ""},
                        index,
                        "user_identifier_missing" if by_user else "assistant_identifier_missing",
                    )
                )
    unique: dict[str, DriftFinding] = {}
    for finding in findings:
        unique.setdefault(finding.evidence["original"], finding)
    findings = list(unique.values())
    prose, _ = _split_summary(summary)
    for ident in sorted(_identifiers(prose) - {q.group(0) for q in _QUANTITY.finditer(prose)}):
        if not _is_in(ident, corpus) and not _rooted(ident, corpus):
            findings.append(_fabricated(ident, "identifier_unsourced"))
    # a path with a directory translated: "测试/billing/test_totals.py" for tests/billing/test_totals.py
    for path in _TRANSLATED_PATH.finditer(prose):
        if path.group(0) not in corpus and _is_in(path.group(1), corpus):
            findings.append(_fabricated(path.group(0), "identifier_unsourced"))
    # a name in code ticks that no message and no call holds: "keeping a `fmt_money_alias`"
    called = ""
    for name in dict.fromkeys(m.group(1) for m in _CODE_NAME.finditer(prose)):
        called = called or "\n".join(call for _, call, _ in _calls(messages)) or " "
        if name not in corpus and name not in called and name.rstrip("s") not in corpus:
            findings.append(_fabricated(name, "identifier_unsourced"))
    # a number with its unit that no message holds: serious in a restated limit ("每晚不超过 1000 元");
    # elsewhere it may be derived (a sum, a conversion), so only noted
    for line in prose.splitlines():
        limit = _is_constraint(line) or _BOUND.search(line)
        for quantity in _QUANTITY.finditer(line):
            if not _is_in(quantity.group(0), corpus):
                code = "limit_number_unsourced" if limit else "number_unsourced"
                findings.append(_fabricated(quantity.group(0), code, "medium" if limit else "low"))
    return findings


#: a name in code ticks: `fmt_money_alias`, `loadRateTable`, `RateCache` (a plain word may be a paraphrase)
_CODE_NAME = re.compile(
    r"`([A-Za-z_][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|[a-z]+[A-Z]\w*|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)(?:\(\))?`"
)


# what names an error in a tool's output: the exception's class, a quoted value, a state word
_ERROR_NAME = re.compile(
    r"\b[A-Z][A-Za-z]*(?:Error|Exception|Exit|Killed|BackOff|NotAvailable|Refused|Timeout|Violation|Denied)\b"
    r"|\b(?:OOMKilled|CrashLoopBackOff|ImagePullBackOff|Segmentation\s+fault|Permission\s+denied|Connection\s+refused"
    r"|not\s+available|not\s+found|timed\s+out)\b"
)
_QUOTED = re.compile(r"'([^'\n]{2,40})'|\"([^\"\n]{2,40})\"")


def _error_keys(line: str) -> set[str]:
    """The words that name an error line: its exception, quoted values and identifiers."""
    keys = {m.group(0) for m in _ERROR_NAME.finditer(line)}
    keys |= {q for m in _QUOTED.finditer(line) for q in m.groups() if q and not q.isspace()}
    keys |= set(_STRONG_ID.findall(line)) | {m.group(1) for m in _FUNCTION.finditer(line)}
    keys |= {n for n in _LONG_NUMBER.findall(line) if n.isdigit()}  # an item: 8823019934
    keys |= set(SERVER_ERROR.findall(line))  # "GET /healthz -> 503 (redis: down)"
    # a bare word ("Error", "assert") names nothing
    return {k for k in keys if len(k) > 2} - {"Error", "Exception"}


# a log line's stamp and level: "2026-11-30T14:01:17.331Z ERROR", "1:M 30 Nov 2026 14:00:59.001 #"; its numbers
# name no error (a summary that reuses them, even inside an invented id, keeps nothing)
_LOG_STAMP = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:[.,]\d+)?Z?)?"
    r"|\b\d{1,2}\s+[A-Z][a-z]{2}\s+\d{4}\b|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b|^\s*\d+:[A-Z]\b"
    r"|\b(?:ERROR|WARN(?:ING)?|INFO|FATAL|CRITICAL|DEBUG)\b"
)


# an error said in words, with no exception or code to name it: "could not acquire migration lock; aborting"
_ERROR_WORDS = re.compile(
    r"\b(?:could\s+not|cannot|can'?t|unable\s+to|failed\s+to|abort(?:ed|ing)|fatal|panic(?:ked)?|timeout\s+after"
    r"|timed\s+out)\b|无法|未能|中止|超时",
    re.I,
)


_EXCEPTION = re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception)\b")
#: an error said in a summary's words: "was flaky", "raises", "is missing ctx", "报错"
_ERROR_SAID = re.compile(
    r"\b(?:error|exception|failed|failure|fails?|failing|flaky|broken|breaks|raises?|raised|missing|wrong|crash\w*"
    r"|timed?\s*out|refused|denied|not\s+found)\b|失败|错误|报错|异常|出错|缺少",
    re.I,
)


def _error_kept(line: str, body: str, keys: set[str], specific: set[str], summary: str, lines: list[str]) -> bool:
    """Whether a summary keeps a tool's error line: by one of its own names (the exception, a quoted value, an
    identifier; "KeyError" alone does not say which KeyError, and "the currency key was missing"
    does not say ``KeyError: 'currency_code'``), or in the other language by its concepts ("连接 10.0.3.17:6379
    被拒绝"); a line with no name of its own by most of its words, in either language. ``body``: the line
    without its log stamp."""
    folded = summary.casefold()
    # "item 8823019934 not found in order #W5823417": the order alone does not say which item
    ids = {k for k in specific if _LONG_NUMBER.fullmatch(k) or _STRONG_ID.fullmatch(k)}
    if len(ids) >= 2 and not all(k.casefold() in folded for k in ids):
        return False
    if any(k.casefold() in folded for k in specific or keys):
        # "An AssertionError in `group_by_customer`" does not keep "TypeError: group_by_customer() missing …"
        named = {k for k in keys - specific if k.endswith(("Error", "Exception"))}
        if not named or any(n.casefold() in folded for n in named):
            return True
        # the name said with an error (in words, or with another of its names: "called without ctx"), and not
        # with another exception: "group_by_customer is over the limit" does not keep its TypeError
        said = [(s, sum(k.casefold() in s.casefold() for k in specific)) for s in lines]
        said = [(s, n) for s, n in said if n]
        return any(_ERROR_SAID.search(s) or n >= 2 for s, n in said) and not any(_EXCEPTION.search(s) for s, _ in said)
    needle = frozenset(_needle(body) - {"1"})
    if len(needle) < 2:
        return not keys
    if keys:
        return any(_cross(line, s) and _x_about_text(needle, s) for s in lines)
    words = set(needle | key_terms(body))
    return any(_x_about_text(needle, s) or _overlap(words, set(_hay(s))) >= MATCH for s in lines)


def _tool_error_lines(messages: Sequence[dict[str, Any]]) -> Iterator[tuple[int, str]]:
    """(index, line) for the two most telling error lines of each tool output, in message order."""
    for index, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "tool":
            text = content_text(m)
            if has_error_hint(text):
                for line in salient_error_lines(text, limit=2):
                    yield index, line


def _check_tool_errors(messages: Sequence[dict[str, Any]], summary: str) -> list[DriftFinding]:
    """Errors that appear only in tool output ("KeyError: 'currency_code'" in a pytest run) and that the summary
    does not keep (:func:`_error_kept`). A note (low): the pinned facts usually keep them."""
    findings = []
    seen: set[str] = set()
    lines = summary.splitlines()
    for index, line in _tool_error_lines(messages):
        keys = _error_keys(line)
        specific = keys - {m.group(0) for m in _ERROR_NAME.finditer(line)}
        if not keys and not _ERROR_WORDS.search(line):
            continue  # "4 failed, 16 passed", "http_req_failed: 0.10%": counters, no error of their own
        body = _LOG_STAMP.sub(" ", line)
        # an error in words only is known by its words
        names = specific or keys or {" ".join(sorted(key_terms(body)))}
        if names <= seen or (specific and specific & seen):
            continue
        seen |= names
        if _error_kept(line, body, keys, specific, summary, lines):
            continue
        findings.append(
            DriftFinding(
                "identifier_missing", "low", {"original": line.strip(), "summary": ""}, index, "tool_error_missing"
            )
        )
    return findings


# "no errors were encountered", "ran without any issues", "没有报错": a claim that nothing failed
_NO_ERRORS = re.compile(
    r"\b(?:no|zero|without(?:\s+any)?|did\s+not\s+(?:encounter|hit|see|find|report)\s+any)\s+(?:\w+\s+)?"
    r"(?:errors?|issues|problems|failures?|exceptions?)\b|\berror-free\b|\bran\s+(?:smoothly|cleanly)\b"
    r"|没有(?:任何)?(?:错误|报错|问题|异常|失败)|未(?:出现|发生|遇到)?(?:任何)?(?:错误|报错|异常)|无(?:错误|报错|异常)|一切正常",
    re.I,
)
_FAILED_LINE = re.compile(r"\b(?:ERROR|FAILED|FATAL)\b|\bError:|Traceback|报错|失败|错误")
# a claim narrowed to a later run ("the tests now run without errors", "修复后没有报错") or to the rest ("no error
# for other flights"): the error it leaves out may stand
_NARROWED = re.compile(
    r"\b(?:now|again|anymore|any\s+more|re-?run|retry|second|this\s+time|fix(?:ed)?|resolved|other|else|rest"
    r"|remaining)\b|现在|修复|之后|重新|再次|解决|其他|其余|别的",
    re.I,
)


def _check_no_errors(messages: Sequence[dict[str, Any]], prose: list[_Statement]) -> list[DriftFinding]:
    """ "The migration was successful and no errors were encountered" when a tool reported one
    ("LockNotAvailable: canceling statement due to lock timeout"): the last error of the archive says otherwise."""
    claim = next(
        (
            s
            for s in prose
            if _NO_ERRORS.search(s.text)
            and not (_HEDGE_KEPT.search(s.text) or _NOT_A_CLAIM.search(s.text) or _NARROWED.search(s.text))
        ),
        None,
    )
    if claim is None:
        return []
    errors = [(index, line.strip()) for index, line in _tool_error_lines(messages)]
    if not errors:
        return []
    # the latest error that names itself ("LockNotAvailable", "FAILED …") rather than a retry warning
    index, line = next(
        (e for e in reversed(errors) if _ERROR_NAME.search(e[1]) or _FAILED_LINE.search(e[1])), errors[-1]
    )
    evidence = {"original": line, "summary": claim.text}
    return [DriftFinding("progress_fabricated", "medium", evidence, index, "errors_denied")]


# a sentence that says who said something: "the user suspects ...", "用户认为 ...", "the agent found ..."
_BY_USER = re.compile(
    r"\b(?:the\s+)?user\s+(?:\w+ly\s+)?(?:said|says|suspects?|suspected|thinks?|thought|believes?|reported|reports"
    r"|noted|notes|mentioned|found|explained|claimed|stated|guessed|pointed\s+out|suggested|proposed|recommended"
    r"|decided|chose|agreed)\b"
    r"|用户(?:说|认为|怀疑|猜测|提到|指出|发现|表示|报告|解释|推测)",
    re.I,
)
_BY_ASSISTANT = re.compile(
    r"\b(?:the\s+)?(?:assistant|agent|model|i|we)\s+(?:\w+ly\s+)?(?:said|says|suspects?|suspected|thinks?|thought"
    r"|believes?|reported|noted|mentioned|found|explained|stated|guessed|asked|requested|wanted|decided|chose|agreed)\b"
    r"|(?:助手|智能体)(?:说|认为|怀疑|猜测|提到|指出|发现|表示|要求|希望)",
    re.I,
)


def _check_attribution(messages: Sequence[dict[str, Any]], prose: list[_Statement]) -> list[DriftFinding]:
    """A statement put in the wrong mouth: "the user suspects the cache" when the assistant suspected it
    (and no user said so), or the reverse. Compared by terms, or across languages by bridge terms."""
    said: dict[str, list[tuple[int, str]]] = {"user": [], "assistant": []}
    for index, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in said or is_summary_message(m):
            continue
        text = user_statement_text(content_text(m)) if role == "user" else windowed(content_text(m), 6_000, 4_000)
        said[str(role)].extend((index, t) for t in split_sentences(text))

    def share(content: str, terms: set[str], sentence: str) -> float:
        if _cross(content, sentence):
            # across languages only the concepts compare, and one is too few to know
            needle = _needle(content)
            return _overlap(needle, _hay(sentence)) if len(needle) >= 2 else 0.0
        return _overlap(terms, key_terms(sentence))

    findings = []
    for s in prose:
        for claimed, other in (("user", "assistant"), ("assistant", "user")):
            cue = (_BY_USER if claimed == "user" else _BY_ASSISTANT).search(s.text)
            if cue is None:
                continue
            content = s.text[cue.end() :]
            terms = key_terms(content)
            if len(terms - _VERBS) < 3:
                continue
            if any(share(content, terms, t) >= MATCH for _, t in said[claimed]):
                continue
            source = next(((i, t) for i, t in said[other] if share(content, terms, t) >= INVERT_MATCH), None)
            if source is not None:
                findings.append(
                    DriftFinding(
                        "wrong_attribution",
                        "medium",
                        {"original": source[1], "summary": s.text},
                        source[0],
                        "wrong_speaker",
                    )
                )
    return findings


# a cause given for something: "A is causing B", "B due to A", "由于 A，B", "A 导致 B"
_CAUSED_BY = re.compile(
    r"\b(?:due\s+to|because(?:\s+of)?|caused\s+by|owing\s+to|as\s+a\s+result\s+of)\b|由于|因为|是因为|源于", re.I
)
_CAUSES = re.compile(
    r"\b(?:is|are|was|were)\s+(?:causing|responsible\s+for)\b|\bcaus(?:es|ed)\b(?!\s+by)|\b(?:leading|led|leads)\s+to\b"
    r"|\bresult(?:s|ed|ing)?\s+in\b|导致|造成|引起|引发",
    re.I,
)


def _cause_parts(clause: str) -> tuple[str, str] | None:
    """(cause, effect) of a clause that gives a cause, or None."""
    m = _CAUSED_BY.search(clause)
    if m:
        before, after = clause[: m.start()], clause[m.end() :]
        if not before.strip(" ，,") and m.group(0) in ("由于", "因为"):  # "由于 A，B"
            cause, _, effect = after.partition("，") if "，" in after else after.partition(",")
            return cause, effect
        return after, before
    m = _CAUSES.search(clause)
    return (clause[: m.start()], clause[m.end() :]) if m else None


def _check_causes(messages: Sequence[dict[str, Any]], prose: list[_Statement]) -> list[DriftFinding]:
    """A cause nothing gives: "the migration script is causing lock timeouts" when no message puts the cause
    and the effect together. Said plainly only: a hedged cause ("likely due to") is the hedge check's. A note:
    the messages may give the cause in words no check reads."""

    @lru_cache(maxsize=1)
    def sources() -> list[frozenset[str]]:  # the terms of each sentence of the messages, once a cause is given
        return [
            _frozen_terms(sentence)[0] | _hay(sentence)
            for _, sentence in _sentences_said(messages, ("user", "assistant", "tool"))
        ]

    findings = []
    for s in prose:
        if _HEDGE_KEPT.search(s.text) or _QUESTION.search(s.text) or _NOT_A_CLAIM.search(s.text):
            continue
        parts = _cause_parts(s.text)
        if parts is None:
            continue
        cause, effect = ((set(_needle(p)) | key_terms(p)) - _ADVERB_WORDS for p in parts)
        if len(cause) < 2 or not effect:
            continue
        whole = key_terms(s.text)
        if any(
            _overlap(cause, hay) >= MATCH and effect & hay or _overlap(whole, hay) >= INVERT_MATCH for hay in sources()
        ):
            continue
        findings.append(
            DriftFinding("wrong_attribution", "low", {"original": "", "summary": s.text}, None, "cause_unsupported")
        )
    return findings


# where a summary places an error: a test id, a path, a function
_TEST_ID = re.compile(r"[\w./-]+\.\w+::[\w\[\]-]+")
_LOCATION = re.compile(
    r"[\w./-]+\.\w+::[\w\[\]-]+|(?<![\w/.])[\w-]+(?:/[\w.-]+)*\.(?:py|js|ts|go|rb|java|sh|yaml|yml)\b|`(\w+)`|\b(\w+)\(\)"
)
_SENTENCE_END = re.compile(r"[.;](?:\s|$)|[。；]")
_PLACED_AFTER = re.compile(r"\b(?:in|at|from|inside|of)\b\s+(?:the\s+)?", re.I)
# "the user has added a test", "用户已修改了": actions the agent did, put on the user
_USER_DID = re.compile(
    r"\b(?:the\s+)?user\s+(?:has\s+|had\s+)?(?:already\s+|now\s+|also\s+)?(?P<v>added|modified|changed|updated|ran|fixed"
    r"|created|deployed|committed|renamed|wrote|written|executed|removed|deleted|extracted|split|refactored|installed"
    r"|migrated|restarted|applied|edited|implemented)\b"
    r"|用户(?:已经?|已)(?P<z>添加|修改|运行|修复|创建|部署|提交|重命名|编写|执行|删除|拆分|重构|安装|迁移|重启)",
    re.I,
)
# users grant approvals; the agent asks for them
_USER_ASKED_APPROVAL = re.compile(
    r"\b(?:the\s+)?user\s+(?:has\s+)?(?:requested|asked\s+for|sought|requests|asks\s+for)\s+(?:\w+\s+)?"
    r"(?:approval|permission|confirmation|consent)\b|用户(?:请求|要求|申请)(?:批准|确认|同意|授权)",
    re.I,
)
# "the tool has also approved running 0042_add_index", "助手已批准": an approval given by the agent side
_AGENT_APPROVED = re.compile(
    r"\b(?:the\s+)?(?:tool|agent|assistant|model|bot)\s+(?:has\s+|had\s+)?(?:also\s+|already\s+)?"
    r"(?:approved|authori[sz]ed|granted\s+(?:permission|approval))\b"
    r"|(?:助手|工具|智能体|模型)(?:也|已经?|已)*(?:批准|授权)(?:了)?",
    re.I,
)
# the lookups a tool makes, said of the user or a customer: "Sofia is checking availability of HAT170", "用户查询了订单"
_LOOKED_UP = (
    r"(?:is\s+|was\s+|has\s+(?:been\s+)?|had\s+(?:been\s+)?)?(?:also\s+|already\s+)?(?:check(?:ed|ing|s)|search(?:ed|ing|es)"
    r"|look(?:ed|ing|s)\s+up|verif(?:ied|ying|ies)|quer(?:ied|ying|ies))\b"
)
_LOOKUP = re.compile(_LOOKED_UP + r"|查询|查看|核实|检查", re.I)
_USER_LOOKED_UP = re.compile(
    r"\b(?:the\s+)?(?:user|customer|caller)\s+"
    + _LOOKED_UP
    + r"|(?:用户|客户)(?:已经?|已|正在|先)?(?:查询|查看|核实|检查)",
    re.I,
)
_FIRST_PERSON_LOOKED = re.compile(
    r"\b(?:i|we)\s+(?:have\s+|'ve\s+|already\s+|just\s+)*(?:checked|searched|looked\s+up|verified|queried)\b"
    r"|我(?:已经?|刚)?(?:查|看|核实|检查)",
    re.I,
)
_ASKS_APPROVAL = re.compile(r"\b(?:may|can|could)\s+i\b|\bis\s+it\s+ok\b|我可以|能不能让我", re.I)
_FIRST_PERSON_DID = re.compile(
    r"\b(?:i|we)\s+(?:have\s+|'ve\s+|already\s+|just\s+)*\w+ed\b|\bi'?ve\b|我(?:已经?|刚)", re.I
)


_LONG_NUMBER = re.compile(r"(?<![\w.])#?[A-Z]?\d{5,}(?![\w.])")
_ERROR_WORD = re.compile(r"error|错误|not\s+found|failed", re.I)
#: a short code in an error line: a flight (HAT170), a product (SKU42): compared only with a like error line
_CODE = re.compile(r"\b[A-Z]{2,4}\d{2,5}\b")


def _swapped_ids(line: str, texts: list[tuple[int, str]]) -> tuple[int, str] | None:
    """An error line whose words are an archived error's but whose identifiers are not: "Error: item
    6117428830 not found in order #W5823417" when the item not found was 8823019934. (index, original)."""
    if not _ERROR_WORD.search(line):
        return None
    line = re.sub(r"\([^)]*\)|（[^）]*）", " ", line)  # "(line 14)": a note, not the error
    # the error's own clause: "…not available on 2024-05-17; rebooked on HAT136" names HAT136 elsewhere
    line = next((c for c in re.split(r"[;；。]", line) if _ERROR_WORD.search(c)), line)
    ids = set(_LONG_NUMBER.findall(line)) | set(_STRONG_ID.findall(line)) | set(_CODE.findall(line))
    words = key_terms(_LONG_NUMBER.sub(" ", line)) - {i.lower() for i in ids}
    if not ids or len(words) < 3:
        return None
    best: tuple[int, str] | None = None
    for index, text in texts:
        if not has_error_hint(text):
            continue
        for raw in text.splitlines():
            if not re.search(r"error|not\s+found|failed", raw, re.I):
                continue
            if _overlap(words, key_terms(_LONG_NUMBER.sub(" ", raw))) < INVERT_MATCH:
                continue
            if all(i in raw for i in ids):
                return None  # the same error, with its own identifiers
            best = best or (index, raw.strip()[:200])
    return best


def _not_anothers(text: str, error: str, name: str) -> bool:
    """Whether ``text`` names ``name`` other than on another error's line: in "TypeError: group_by_customer()
    missing 1 required positional argument" the function is the TypeError's, not an AssertionError's."""
    return any(
        error in line or all(e.group(0) == error for e in _ERROR_NAME.finditer(line))
        for line in text.splitlines()
        if name in line
    )


def _near(text: str, a: str, b: str, span: int = 2) -> bool:
    """Whether ``a`` and ``b`` are within ``span`` lines of each other in ``text``."""
    lines = text.splitlines()
    at = [i for i, line in enumerate(lines) if a in line]
    return any(b in line for i in at for line in lines[max(0, i - span) : i + span + 1])


#: what an identifier is: (role, English words, Chinese words). Roles that people use for one another (an airline
#: "booking" is a "reservation", a retail "order" may be called either) share a role.
_ROLES = (
    ("order", r"orders?|reservations?|bookings?", "订单|预订|预约"),
    ("ticket", r"tickets?|cases?|issues?", "工单"),
    ("user", r"users?|usernames?|customers?|accounts?|members?|passengers?", "用户|客户|账号|账户|会员|乘客"),
    ("item", r"items?|products?|skus?", "商品|物品|货品|产品"),
    ("flight", r"flights?", "航班"),
    ("payment", r"payments?|payment\s+methods?|cards?", "支付方式|付款方式|支付|卡"),
    ("staff", r"sales(?:person|man|woman)?|employees?|staff|sellers?|clerks?", "销售员|销售|员工|店员|客服"),
)
_ROLE_OF_WORD = [(role, re.compile(rf"(?:{en})$", re.I), re.compile(rf"(?:{zh})$")) for role, en, zh in _ROLES]
_ROLE_WORDS = "|".join(f"{en}|{zh}" for _, en, zh in _ROLES)
#: a role word right before an identifier: "order #W5823417", "user id: li_wei_3391", "the return flight ID is X"
_ROLE_BEFORE = re.compile(
    rf"(?P<role>{_ROLE_WORDS})[\s`'\"*]*(?:(?:id|ids|number|no\.?|ref(?:erence)?|code|编号|号码?|ID)[\s`'\"*]*)?"
    r"(?:(?:is|was|:|：|=|为|是)[\s`'\"*]*)?(?:the\s+)?#?$",
    re.I,
)
#: an identifier said to be something: "`W7730285` 是工单 ID", "li_wei_3391 is the order number"
_ROLE_AFTER = re.compile(
    r"^[`'\"*]*\s*(?:is|was|are|是|为|作为)\s*(?:the\s+|a\s+|an\s+|its\s+|their\s+|his\s+|her\s+)?"
    rf"(?P<phrase>[^\n,.;，。；:：()（）]{{0,24}}?)(?P<role>{_ROLE_WORDS})\s*(?:id|ID|number|编号|号码?)?"
    r"(?=[\s`'\"*]*(?:$|[\n,.;，。；:：()（）]))",
    re.I,
)
#: a JSON key naming what its value is: order_id for "#W5823417", item_ids for ["6117428830"]
_ROLE_KEY = re.compile(r'"(?P<key>[A-Za-z]+)_(?:id|ids|number|no)"\s*:\s*(?P<value>\[[^\]]{0,400}\]|"[^"]{1,80}")')


def _role_of(word: str) -> str | None:
    for role, en, zh in _ROLE_OF_WORD:
        if en.search(word) or zh.search(word):
            return role
    return None


def _roles_at(text: str, start: int, end: int) -> set[str]:
    """What ``text`` calls the identifier at ``text[start:end]``: a role word just before it, or "… is a <role>"."""
    words = []
    before = _ROLE_BEFORE.search(text[max(0, start - 40) : start])
    if before:
        words.append(before.group("role"))
    after = _ROLE_AFTER.match(text[end : end + 60])
    # the head noun is the last role word: "用户名下订单编号" is an order number
    if after and not re.search(r"\b(?:of|for|from|in|by|with)\b|的|下|里|中", after.group("phrase")):
        words.append(after.group("role"))
    return {role for role in map(_role_of, words) if role}


def _roles_in(text: str, ident: str) -> set[str]:
    """What ``text`` calls ``ident`` wherever it names it."""
    roles: set[str] = set()
    for m in re.finditer(rf"(?<![\w]){re.escape(ident)}(?![\w])", text):
        roles |= _roles_at(text, m.start(), m.end())
    return roles


def _original_roles(messages: Sequence[dict[str, Any]]) -> dict[str, set[str]]:
    """Identifier -> the roles the originals give it (by the words around it and by the JSON keys it sits under).
    A long session holds thousands of identifiers: each message is read once, and again only from the cache."""
    roles: dict[str, set[str]] = {}
    for part in _corpus_parts(m for m in messages if isinstance(m, dict) and not is_summary_message(m)):
        for ident, found in _text_roles(part):
            roles.setdefault(ident, set()).update(found)
    return roles


@remember_short(max_chars=10_000, maxsize=16_384)
def _text_roles(text: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """(identifier, the roles ``text`` gives it) for each identifier ``text`` names with a role."""
    roles: list[tuple[str, frozenset[str]]] = []
    for m in _ROLE_KEY.finditer(text):
        role = _role_of(m.group("key"))
        if role:
            roles.extend((ident, frozenset({role})) for ident in re.findall(r'"#?([^"]{3,80})"', m.group("value")))
    for pattern in (_STRONG_ID, _LONG_NUMBER):
        for m in pattern.finditer(text):
            found = _roles_at(text, m.start(), m.end())
            if found:
                roles.append((m.group(0).lstrip("#"), frozenset(found)))
    return tuple(roles)


def _check_roles(messages: Sequence[dict[str, Any]], prose_text: str) -> list[DriftFinding]:
    """An identifier called something it is not: a user id as an order number, an order as a ticket, a
    reservation as a flight ("销售员 ID: li_wei_3391" for the customer's user id)."""
    known = _original_roles(messages)
    findings = []
    for raw in prose_text.splitlines():
        line = raw.strip()
        for ident, roles in known.items():
            if ident not in line:
                continue
            said = _roles_in(line, ident)
            if said and not said & roles:
                findings.append(
                    DriftFinding(
                        "wrong_attribution",
                        "medium",
                        {"original": f"{ident}: {', '.join(sorted(roles))}", "summary": line},
                        None,
                        "identifier_mistyped",
                    )
                )
                break
    return findings


@lru_cache(maxsize=1)
def _instruction_rules() -> tuple[frozenset[str], ...]:
    """The key terms of each rule of every summarizer prompt (all versions and languages), for
    :func:`_copies_instructions`."""
    rules = []
    for templates in PROMPTS.values():
        for text in templates.system.values():
            for block in re.split(r"\n(?=- )|\n\n", text):
                for sentence in re.split(r"(?<=[.。；;])\s*", block):
                    terms = frozenset(_content_words(sentence))
                    if len(terms) >= 3:
                        rules.append(terms)
    return tuple(rules)


#: share of a summary line's content terms that one prompt rule must hold for the line to be a copy of it
COPIED = 0.7


def _copies_instructions(text: str, corpus_terms: frozenset[str]) -> bool:
    """Whether a summary line restates the summarizer's own rules ("Never turn a prohibition into an
    instruction", "按用户的原话写禁止和长期要求") rather than anything said in the session: small models copy
    them under "Constraints" as if the user had said them."""
    terms = _content_words(text)
    # "No prohibition, limit, approval ... of the user": the model says there is none, in the prompt's words
    if len(terms) < 3 or re.match(r"\W*(?:no|none|nothing)\b|\W*(?:没有|无)", text, re.I):
        return False
    best = max((len(terms & rule) for rule in _instruction_rules()), default=0)
    return best >= 3 and best >= COPIED * len(terms) and best > len(terms & corpus_terms)


_TIMESTAMP = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?Z?")
_LOG_FIELD = re.compile(r"\b[a-z_]+=[^\s,;|]+|\b(?:ERROR|WARN(?:ING)?|INFO|DEBUG|FATAL|CRITICAL)\b")


def _check_log_lines(messages: Sequence[dict[str, Any]], prose_text: str) -> list[DriftFinding]:
    """A log line quoted in the summary that no log holds: its timestamp from one line, its level or
    request id from another ("…14:00:00.590Z ERROR migrate request_id=req-87676 …" where that request was
    an INFO line at another time). Copying a log line is fine; splicing two is inventing one."""
    lines = _corpus(messages).splitlines()
    findings = []
    for raw in prose_text.splitlines():
        stamp = _TIMESTAMP.search(raw)
        if stamp is None:
            continue
        fields = set(_LOG_FIELD.findall(raw[stamp.end() : stamp.end() + 300]))
        if not fields:
            continue
        same_time = [line for line in lines if stamp.group(0) in line]
        same_fields = [line for line in lines if all(f in line for f in fields)]
        if not same_time and not same_fields:
            continue  # a paraphrase or a reformatted time: nothing to compare with
        if any(line in same_fields for line in same_time):
            continue
        source = same_time[0] if same_time else same_fields[0]
        findings.append(
            DriftFinding(
                "identifier_fabricated",
                "medium",
                {"original": source.strip()[:200], "summary": raw.strip()},
                None,
                "log_line_spliced",
            )
        )
    return findings


#: a test said to fail, by what it tests: "the negative-amounts test failed", "折扣测试失败"
_TEST_SAID_FAILED = re.compile(
    r"(?P<en>(?:[\w-]+\s+){1,3}?)tests?\s+(?:has\s+|have\s+|was\s+|were\s+|is\s+|are\s+)?(?:failed|fails|failing)\b"
    r"|(?P<zh>[\u4e00-\u9fff]{2,8}?)测试(?:用例)?(?:仍然|还是|也)?(?:失败|报错|没通过|未通过)",
    re.I,
)
_TEST_PASSES = re.compile(r"\bpass(?:es|ed|ing)?\b|通过", re.I)


#: a transcript line of a tool call with its speaker: "#6 ASSISTANT: -> calls terminal(...)", "Sofia: -> calls ..."
_CALL_SPEAKER = re.compile(
    r"(?:^|[\s#\d])(?P<who>[A-Za-z][\w .]{0,30}?|用户)\s*(?:\(turn \d+\))?\s*[:：]\s*->\s*calls\b", re.M
)


def _names_account(name: str, corpus: str) -> bool:
    """Whether ``name`` is one an account in ``corpus`` is spelled from ("Sofia" of sofia_kim_7287)."""
    return re.search(rf"\b{re.escape(name.lower())}_\w+_\d+\b", corpus) is not None


def _check_call_speaker(prose_text: str, corpus: str) -> list[DriftFinding]:
    """The agent's tool calls put in the user's mouth, as a copied transcript line: "- Sofia: -> calls …" (the
    user by role, or by the name their account is spelled from: "Sofia" of sofia_kim_7287). One finding: a
    transcript copied with the wrong speaker is one error."""
    for line in prose_text.splitlines():
        speaker = _CALL_SPEAKER.search(line)
        who = speaker.group("who").strip() if speaker else ""
        if who.upper() in ("USER", "用户") or (who.isalpha() and _names_account(who, corpus)):
            evidence = {"original": "", "summary": line.strip()}
            return [DriftFinding("wrong_attribution", "medium", evidence, None, "wrong_speaker")]
    return []


def _check_test_outcomes(messages: Sequence[dict[str, Any]], prose_text: str) -> list[DriftFinding]:
    """A test said to fail that the originals only ever say passes: "The negative-amounts test failed because
    it forgot to pass ctx" when the agent wrote "The negative-amount test passes. New failure: ..."."""
    said: list[tuple[int, str]] | None = None
    findings = []
    for clause in re.split(r"[\n;；。]|\.\s", prose_text):
        m = _TEST_SAID_FAILED.search(clause)
        if m is None:
            continue
        subject = key_terms(m.group("en") or m.group("zh") or "") - {"the", "all", "some", "our", "测试"}
        if not subject:
            continue
        if said is None:
            said = [(i, t) for i, t in _sentences_said(messages, ("assistant", "tool")) if _TEST_WORDS.search(t)]
        about = [(i, t) for i, t in said if subject <= key_terms(t)]
        failed = [t for _, t in about if _TEST_FAIL_WORDS.search(t) or _FAILED_RESULT.search(t)]
        passed = [(i, t) for i, t in about if _TEST_PASSES.search(t) and not _TEST_FAIL_WORDS.search(t)]
        if passed and not failed:
            index, text = passed[-1]
            evidence = {"original": text, "summary": clause.strip()}
            findings.append(DriftFinding("wrong_attribution", "medium", evidence, index, "error_misplaced"))
    return findings


def _check_placement(messages: Sequence[dict[str, Any]], prose_text: str) -> list[DriftFinding]:
    """An error placed where it did not happen ("KeyError in `fmt_money`" when the KeyError came from
    test_currency.py), and an action of the agent put on the user ("the user has added a test")."""
    texts = [(i, _corpus([m])) for i, m in enumerate(messages) if isinstance(m, dict) and not is_summary_message(m)]
    corpus = "\n".join(t for _, t in texts)
    # a call names what its whole result is about: the error in ``sed -n 1,80p constraints.py``'s output is there
    calls = [(call, result) for _, call, result in _calls(messages) if result]
    units: list[_Passage] | None = None
    users: list[str] | None = None
    findings = []
    for raw in prose_text.splitlines():
        line = raw.strip()
        names = [m for m in _ERROR_NAME.finditer(line) if m.group(0) in corpus and m.group(0) not in ("not found",)]
        for name in names[:1]:
            error = name.group(0)
            # the error's own sentence: "X timed out. The output was: … reproduce_issue.py" places nothing
            before = _SENTENCE_END.split(line[: name.start()])[-1]
            after = _SENTENCE_END.split(line[name.end() :])[0]
            # (up to the next error: "KeyError in currency tests and TypeError: group_by_customer() …")
            following = _ERROR_NAME.search(after)
            after = after[: following.start()] if following else after
            placed = _PLACED_AFTER.search(after)
            zones = [before] + ([after[placed.end() :]] if placed else [])
            for zone in zones:
                for loc in _LOCATION.finditer(zone):
                    where = next((g for g in loc.groups() if g), loc.group(0))
                    if len(where) < 4 or where == error:
                        continue
                    file_part = where.split("::", 1)[0].rsplit("/", 1)[-1]
                    if where not in corpus and not ("::" in where and file_part in corpus):
                        continue
                    # a test id or a path on the error's own lines; a function anywhere in a message with the error
                    span = 2 if "::" in where or "." in where else 10_000
                    if any(
                        error in t
                        and (_near(t, error, where, span) or _near(t, error, file_part, 0))
                        and (span == 2 or _not_anothers(t, error, where))
                        for _, t in texts
                    ) or any(error in result and (where in call or file_part in call) for call, result in calls):
                        continue
                    if span > 2:  # an AssertionError in tests/export/test_money.py is one in format_money
                        units = units if units is not None else _pairs_index(messages)
                        if _tested_together(units, error, where):
                            continue
                    source = next((i for i, t in texts if error in t), None)
                    findings.append(
                        DriftFinding(
                            "wrong_attribution",
                            "medium",
                            {"original": error, "summary": line},
                            source,
                            "error_misplaced",
                        )
                    )
                    break
                else:
                    continue
                break
        asked = _USER_ASKED_APPROVAL.search(line)
        if asked and not any(
            _ASKS_APPROVAL.search(content_text(m)) for m in messages if isinstance(m, dict) and m.get("role") == "user"
        ):
            findings.append(
                DriftFinding("wrong_attribution", "medium", {"original": "", "summary": line}, None, "user_did_not")
            )
        swapped = _swapped_ids(line, texts)
        if swapped is not None:
            findings.append(
                DriftFinding(
                    "wrong_attribution",
                    "medium",
                    {"original": swapped[1], "summary": line},
                    swapped[0],
                    "error_misplaced",
                )
            )
        if _AGENT_APPROVED.search(line) and not _NOT_DONE.search(line):
            # users approve; an approval put on the agent or its tool is someone else's
            findings.append(
                DriftFinding("wrong_attribution", "medium", {"original": "", "summary": line}, None, "wrong_speaker")
            )
        # a person named for their account ("Sofia" of sofia_kim_7287) is a customer too
        looked = _LOOKUP.search(line) and (
            _USER_LOOKED_UP.search(line)
            or any(
                re.search(rf"\b{name}\b(?:\s+[A-Z][\w-]*)?\s+" + _LOOKED_UP, line)
                for name in set(re.findall(r"\b([A-Z][a-z]{2,})\b", line))
                if _names_account(name, corpus)
            )
        )
        # the user did it, in the summary's words, when no user turn says "I did" / "I checked"
        for said, first_person in ((looked, _FIRST_PERSON_LOOKED), (_USER_DID.search(line), _FIRST_PERSON_DID)):
            if said:
                users = users if users is not None else [content_text(m) for m in messages if role_of(m) == "user"]
                if not any(first_person.search(u) for u in users):
                    findings.append(
                        DriftFinding(
                            "wrong_attribution", "medium", {"original": "", "summary": line}, None, "user_did_not"
                        )
                    )
    return findings


#: what a summary pairs with what: an order and its item, an error and the test or function that raised it,
#: a file and the constant written into it
_PAIRED = re.compile(
    r"(?<![\w/.-])[\w-]+(?:/[\w.-]+)*\.(?:py|js|ts|go|rb|java|sh|sql|yaml|yml|json|toml)\b"  # a file
    r"|(?<![\w#])#?[A-Z]{1,3}\d{6,}\b|(?<![\w.])\d{8,}(?![\w.])"  # an order, an item
    r"|\b[A-Z]{2,4}\d{2,5}\b"  # a flight, a product code
    r"|\b(?=[A-Z0-9]*\d[A-Z0-9]*[A-Z])(?=[A-Z0-9]*[A-Z][A-Z0-9]*\d)[A-Z0-9]{6}\b"  # a reservation
    r"|\b[A-Z][A-Za-z]*(?:Error|Exception)\b"  # an exception
    r"|\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"  # a constant
    r"|\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b",  # a function or variable
    re.ASCII,
)
_PAIR_CLAUSE = re.compile(r"[\n;；。,，]|\.\s+")


def _shape(token: str) -> str:
    """What kind of thing ``token`` is, as far as its spelling tells: two of one shape are siblings."""
    token = token.lstrip("#")
    if re.search(r"(?:Error|Exception)$", token):
        return "error"
    if "." in token:
        return "file"
    if re.fullmatch(r"[a-z]+(?:_[a-z]+)+_\d+", token):
        return "account"
    if token.islower():
        return "name"
    if "_" in token:
        return "constant"
    if len(token) == 6 and not re.fullmatch(r"[A-Z]+\d+", token):
        return "reservation"
    if re.fullmatch(r"[A-Z]{1,3}\d{6,}", token):
        return "order"
    return re.sub(r"\d+", lambda m: f"{len(m.group(0))}", re.sub(r"[A-Z]+", "A", token))


@dataclass(frozen=True)
class _Passage:
    """A passage of the originals that puts things together: ``head`` holds for all of it, ``lines`` by runs."""

    index: int
    head: str
    lines: list[str]


def _pairs_index(messages: Sequence[dict[str, Any]]) -> list[_Passage]:
    """The passages of ``messages``: a short message (with its calls) whole, a long one by runs of five lines,
    a call's arguments with all of its result (the call names what its result is about)."""
    calls = _calls(messages)
    answered = {result for _, _, result in calls}
    by_message: dict[int, list[str]] = {}
    for index, call, _ in calls:
        by_message.setdefault(index, []).append(call)
    units: list[_Passage] = []
    for index, m in enumerate(messages):
        if not isinstance(m, dict) or is_summary_message(m):
            continue
        if m.get("role") == "tool":
            if content_text(m) not in answered:  # a result is read with its call
                units.append(_Passage(index, "", content_text(m)[:20_000].splitlines()))
            continue
        # a message with its calls: "改回 ROUND_HALF_UP。" and the write to billing/tax.py it announces
        text = "\n".join([content_text(m), *by_message.get(index, ())])
        short = len(text) <= 600 or text.count("\n") < 5
        units.append(_Passage(index, text, []) if short else _Passage(index, "", text.splitlines()))
    units += [_Passage(index, call, result[:20_000].splitlines()) for index, call, result in calls]
    return units


def _near_lines(lines: list[str], a: str) -> list[str]:
    """The runs of five lines around each line of ``lines`` that holds ``a``."""
    return ["\n".join(lines[max(0, i - 2) : i + 3]) for i, line in enumerate(lines) if a in line]


def _together(units: list[_Passage], a: str, b: str) -> bool:
    for u in units:
        if a in u.head and (b in u.head or any(b in line for line in u.lines)):
            return True
        if b in u.head and any(a in line for line in u.lines):
            return True
        if any(b in run for run in _near_lines(u.lines, a)):
            return True
    return False


def _held_through(units: list[_Passage], a: str, b: str) -> bool:
    """An account and a thing one of its records holds: sofia_kim_7287 and HAT136, when her reservation NO6JO3
    was moved to HAT136."""
    account, thing = (a, b) if _shape(a) == "account" else (b, a)
    if _shape(thing) in ("reservation", "order"):
        return False  # a record is held by its account alone
    records = {**_siblings(units, account, "reservation"), **_siblings(units, account, "order")}
    return any(_together(units, record, thing) for record in records)


def _tested_together(units: list[_Passage], a: str, b: str) -> bool:
    """An error and a function, when the error came from the function's test file: an AssertionError in
    tests/export/test_money.py is one in format_money."""
    error, name = (a, b) if _shape(a) == "error" else (b, a)
    if _shape(error) != "error" or _shape(name) != "name":
        return False
    parts = {p for p in name.split("_") if len(p) >= 4} - {"test", "tests"}  # every test file says "test"
    return bool(parts) and any(parts & set(re.split(r"[/_.]", f)) for f in _siblings(units, error, "file"))


def _siblings(units: list[_Passage], b: str, shape: str) -> dict[str, tuple[int, str]]:
    """What of ``shape`` the originals put together with ``b``, each with (message index, the passage)."""
    found: dict[str, tuple[int, str]] = {}
    for u in units:
        texts = [u.head, *u.lines] if b in u.head else _near_lines(u.lines, b)
        for text in texts:
            for t in _PAIRED.findall(text):
                if _shape(t) == shape:
                    found.setdefault(t.lstrip("#"), (u.index, text))
    return found


def _excerpt(text: str, a: str, b: str, width: int = 240) -> str:
    """The part of ``text`` around ``a`` and ``b`` (in the order they come), on one line."""
    flat = re.sub(r"\s+", " ", text)
    at = [flat.find(x) for x in (a, b) if x in flat]
    start = max(0, min(at, default=0) - 40)
    return ("…" if start else "") + flat[start : start + width].strip() + ("…" if start + width < len(flat) else "")


#: a person by name: "Sofia Kim", whose account the tools call sofia_kim_7287
_PERSON = re.compile(r"\b([A-Z][a-z]+)\s+([A-Z][a-z]+)\b")


def _user_ids(clause: str, corpus: str) -> list[str]:
    """The account ids of the people ``clause`` names, as the originals spell them: "Sofia Kim" -> sofia_kim_7287."""
    found: list[str] = []
    for first, last in _PERSON.findall(clause):
        found += re.findall(rf"\b{first.lower()}_{last.lower()}_\d+\b", corpus)[:1]
    return list(dict.fromkeys(found))


def _check_pairs(messages: Sequence[dict[str, Any]], prose_text: str) -> list[DriftFinding]:
    """Two real things put together that the originals never put together, when they put one of them with a
    sibling of the other: "#W7730285 的机械键盘（6117428830）" when 6117428830 was returned on #W5823417; an
    AssertionError in `group_by_customer` when group_by_customer raised a TypeError."""
    units: list[_Passage] | None = None
    corpus = ""
    findings: list[DriftFinding] = []
    for clause in _PAIR_CLAUSE.split(_CITATION.sub(" ", prose_text)):
        tokens = list(dict.fromkeys(t.lstrip("#") for t in _PAIRED.findall(clause)))
        if len(tokens) > 3 or len(tokens) + bool(_PERSON.search(clause)) < 2:
            continue
        if units is None:
            units = _pairs_index(messages)
            corpus = "\n".join(u.head + "\n" + "\n".join(u.lines) for u in units)
        if len(tokens) < 3:  # a person named stands for their account, when the clause has room for it
            tokens += _user_ids(clause, corpus)[: 3 - len(tokens)]
        if len(tokens) < 2:
            continue
        tokens = [t for t in tokens if t in corpus]
        at = {t: clause.find(t) for t in tokens}
        for a, b in permutations(tokens, 2):
            if _shape(a) == _shape(b) or a in b or b in a:
                continue
            # a list pairs each thing with the nearer of two of a kind ("KeyError: 'currency_code' and
            # AssertionError: …"); a person's account, named by the person, has no place in the clause
            if any(
                abs(at[c] - at[y]) < abs(at[a] - at[b])
                for x, y in ((a, b), (b, a))
                for c in tokens
                if c not in (a, b) and _shape(c) == _shape(x) and min(at[a], at[b], at[c]) >= 0
            ):
                continue
            # an account holds its reservations and orders, and a flight or an item through them
            if "account" in (_shape(a), _shape(b)) and _held_through(units, a, b):
                continue
            if _together(units, a, b) or _tested_together(units, a, b):
                continue
            others = {k: v for k, v in _siblings(units, b, _shape(a)).items() if k != a}
            if not others:
                continue
            sibling = min(others)
            index, passage = others[sibling]
            evidence = {"original": _excerpt(passage, b, sibling), "summary": clause.strip()}
            findings.append(DriftFinding("wrong_attribution", "medium", evidence, index, "ids_mismatched"))
            break
    return findings


#: a line that tells to change something: "Drop lru_cache from load_rate_table", "修改 billing/rates_cache.py 中的逻辑"
_CHANGE_FIRST = re.compile(
    r"^\W*(?:[\w ]{0,30}\(#\d+\)\s*:\s*)?(?:drop|remove|delete|change|modify|edit|fix|refactor|rewrite|add|update"
    r"|revert|replace|rename|split|move|patch)\b|^\W*(?:删除?|去掉|修改|改回|改成|改为|改|重构|拆分?|添加|更新|替换|重命名)",
    re.I,
)
_DEFINED = re.compile(r"^\s*(?:\d+\s+)?(?:async\s+)?(?:def|class|function)\s+(\w+)", re.M)


#: a Chinese name right before a path: "税率表那边 billing/rates_cache.py" (1: the name, 2: the path)
_CALLED = re.compile(r"([\u4e00-\u9fff]{2,8}?)(?:那边|这边|那个|这个|里的|的)?\s*`?((?:[\w.-]+/)*[\w-]+\.[a-z]{1,4})\b")
_GENERIC_NOUN = re.compile(r"(?:文件|代码|脚本|模块|目录|配置|测试|这|那|改|动|别|不要)+")


def _file_names(text: str) -> Iterable[tuple[str, str]]:
    """(name, path) for each file ``text`` calls by a Chinese name: "税率表那边 billing/rates_cache.py" -> (税率表,
    billing/rates_cache.py); words that name no file in particular ("文件", "不要改") are not names."""
    return ((m.group(1), m.group(2)) for m in _CALLED.finditer(text) if not _GENERIC_NOUN.fullmatch(m.group(1)))


def _check_protected(
    messages: Sequence[dict[str, Any]], constraints: list[_Statement], prose_text: str
) -> list[DriftFinding]:
    """A line that tells to change a file the user said not to touch, or a function the tools showed defined in
    it: "Drop lru_cache from load_rate_table (memory)." for "Don't touch rates.py in this PR"."""
    protected: dict[str, _Statement] = {}
    for c in constraints:
        if _is_prohibitive(c.text):
            for f in _PAIRED.findall(c.text):
                if _shape(f) == "file":
                    protected.setdefault(f.rsplit("/", 1)[-1], c)
    if not protected:
        return []
    names = dict(protected)
    for c in constraints:
        # what the user calls the file: "税率表那边 billing/rates_cache.py 不要动" -> 税率表
        for name, path in _file_names(c.text):
            base = path.rsplit("/", 1)[-1]
            if base in protected:
                names.setdefault(name, protected[base])
    for _, call, result in _calls(messages):
        for f, c in protected.items():
            if f in call:
                names.update((n, c) for n in _DEFINED.findall(result[:20_000]) if len(n) >= 4)
    findings = []
    hits: list[tuple[str, _Statement, tuple[int, str] | None]] = []
    for clause in re.split(r"[\n;；。]|\.\s", prose_text):
        if not _CHANGE_FIRST.search(clause) or _NOT_DONE.search(clause) or _QUESTION.search(clause):
            continue
        hit = next(
            (
                c
                for n, c in names.items()
                if (n in clause if _CJK.match(n) else re.search(rf"(?<![\w/]){re.escape(n)}(?!\w)", clause))
            ),
            None,
        )
        if hit is not None:
            hits.append((clause.strip(), hit, _made_elsewhere(messages, clause, set(names))))
    for clause, hit, made in hits:
        # a shorter line about the same change ("修改税率表的舍入模式") is the same misplaced change
        made = made or next(
            (m for other, h, m in hits if m and h is hit and _overlap(key_terms(clause), key_terms(other)) >= MATCH),
            None,
        )
        if made is not None:
            # the change is real, in another file: put on the protected one ("改回 rates_cache.py 中的舍入模式为
            # ROUND_HALF_UP" when ROUND_HALF_UP went back into billing/tax.py)
            evidence = {"original": made[1], "summary": clause}
            findings.append(DriftFinding("wrong_attribution", "medium", evidence, made[0], "change_misplaced"))
            continue
        evidence = {"original": hit.text, "summary": clause}
        findings.append(DriftFinding("constraint_inverted", "high", evidence, None, "protected_changed"))
    return findings


def _made_elsewhere(messages: Sequence[dict[str, Any]], clause: str, protected: set[str]) -> tuple[int, str] | None:
    """(index, text) of a message that writes another file with what ``clause`` names besides ``protected``."""
    named = {t for t in _PAIRED.findall(clause) if _shape(t) != "file" and t not in protected}
    if not named:
        return None
    for index, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        written = {p for p in _written_paths(m) if p.rsplit("/", 1)[-1] not in protected}
        text = content_text(m)
        if written and any(t in text for t in named):
            return index, f"{text.strip()[:160]} ({', '.join(sorted(written))})"
    return None


_NAME_NUMBER = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*[:=]?\s+(\d+)\s*$", re.M)


def _check_constraint_objects(
    messages: Sequence[dict[str, Any]], constraints: list[_Statement], summary: str
) -> list[DriftFinding]:
    """The name of the thing a constraint protects, as the agent's commands give it: "不要删 PVC" and
    ``kubectl describe pvc redis-data-redis-0``: the summary keeps ``redis-data-redis-0``. A note (low)."""
    kinds = {w.lower() for c in constraints for w in re.findall(r"\b[A-Za-z]{2,14}\b", c.text)} & _OBJECT_KINDS
    if not kinds:
        return []
    findings = []
    for index, call, _ in _calls(messages):
        for hit in _OBJECT_NAMED.finditer(call):
            kind, name = hit.group(1).lower(), hit.group(2)
            if kind in kinds and not _is_in(name, summary):
                evidence = {"original": name, "summary": ""}
                findings.append(
                    DriftFinding("identifier_missing", "low", evidence, index, "assistant_identifier_missing")
                )
    return list({f.evidence["original"]: f for f in reversed(findings)}.values())


# a kind of object and its name in a command: "pvc redis-data-redis-0", "branch release-2.4"
_OBJECT_NAMED = re.compile(r"\b([A-Za-z]{2,14})\s+((?!-)[\w.-]*(?:-|\d)[\w.-]*\w)")
#: kinds of lasting things a command names and a user protects by kind ("don't delete the PVC", "leave that branch
#: alone"; not pods or containers, whose names come and go)
_OBJECT_KINDS = frozenset(
    (  # noqa: SIM905 (a list of words reads better as words)
        "pvc pv volume deployment statefulset daemonset service namespace secret configmap cronjob ingress"
        " branch tag repo table index database db schema bucket queue topic stream image"
    ).split()
)


def _check_values(messages: Sequence[dict[str, Any]], prose_text: str) -> list[DriftFinding]:
    """A number given to the wrong name of a tool's table ("apply_rates: 22 lines" when the table says
    ``apply_rates 31`` and ``normalize_row 22``)."""
    tables: list[tuple[int, dict[str, set[str]]]] = []
    for index, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "tool":
            rows: dict[str, set[str]] = {}
            for hit in _NAME_NUMBER.finditer(content_text(m)[:20_000]):
                rows.setdefault(hit.group(1), set()).add(hit.group(2))
            if len(rows) >= 3:
                tables.append((index, rows))
    findings = []
    for line in _CITATION.sub(" ", prose_text).splitlines() if tables else ():
        said_values = [(said.group(1), said.group(2)) for said in _SAID_VALUE.finditer(line)]
        for index, rows in tables:
            for name, number in said_values:
                if name not in rows or number in rows[name]:
                    continue
                owners = [other for other, values in rows.items() if number in values and other != name]
                if owners and not any(owner in line for owner in owners):
                    evidence = {
                        "original": f"{name} {'/'.join(sorted(rows[name]))}; {owners[0]} {number}",
                        "summary": line.strip(),
                    }
                    findings.append(DriftFinding("wrong_attribution", "medium", evidence, index, "value_misplaced"))
    unique = {f.evidence["summary"]: f for f in reversed(findings)}
    return list(reversed(unique.values()))


# a name and the number said of it: "apply_rates: 22 lines", "**write_csv** (35 lines)", "calc_tax 是 46 行"
_SAID_VALUE = re.compile(
    r"([A-Za-z_][\w.]*)\W{0,4}(?:(?:is|has|at|was|now|still|是|有|为|共)\s*){0,2}\W{0,2}(\d+)(?![\d.,:/])", re.ASCII
)


def _check_breaches(
    messages: Sequence[dict[str, Any]], constraints: list[_Statement], summary: str
) -> list[DriftFinding]:
    """What a tool showed over a user's limit ("group_by_customer 44" against "≤ 40 lines"): the summary
    keeps the name and its number. A note (low)."""
    limits = []
    for c in constraints:
        bound = re.search(r"(?:≤|<=|at\s+most|no\s+more\s+than|under|不超过|最多|以内)\s*(\d+)|(\d+)\s*行以内", c.text)
        if bound and "line" in _needle(c.text):
            limits.append(int(bound.group(1) or bound.group(2)))
    if not limits:
        return []
    limit = min(limits)
    summary = _CITATION.sub(" ", summary)  # "(#46)" is no 46
    findings = []
    for index, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") != "tool":
            continue
        for hit in _NAME_NUMBER.finditer(content_text(m)[:20_000]):
            name, number = hit.group(1), int(hit.group(2))
            if limit < number <= 3 * limit and not (name in summary and _has_number(summary, str(number))):
                findings.append(
                    DriftFinding(
                        "identifier_missing",
                        "low",
                        {"original": f"{name} {number}", "summary": ""},
                        index,
                        "limit_breach_missing",
                    )
                )
    unique = {f.evidence["original"]: f for f in findings}  # the latest count of each name
    return list({f.evidence["original"].split()[0]: f for f in unique.values()}.values())


def _fabricated(ident: str, code: str, severity: str = "medium") -> DriftFinding:
    return DriftFinding("identifier_fabricated", severity, {"original": "", "summary": ident}, None, code)


def _hedged(sentence: str, index: int) -> list[_Statement]:
    """What a hedged sentence claims: the sentence, and its hedged clause when that says enough on its own."""
    terms, anchors = _terms(sentence)
    units = [_Statement(sentence, index, terms, anchors=anchors)]
    parts = _clauses(sentence)
    for part in parts if len(parts) > 1 else ():
        if _HEDGE.search(part):
            t, a = _terms(part)
            if len(t) >= 3 and len(t - a) >= 2:
                units.append(_Statement(sentence, index, t, core=t, anchors=a))
    return units


def _about_hedge(h: _Statement, s: _Statement) -> bool:
    """``s`` repeats the claim ``h``: most of its terms, and half of its words beyond the identifiers."""
    words = h.terms - h.anchors
    # a clause alone (``core`` set), or a short sentence, must be repeated nearly whole: it has few terms
    share = INVERT_MATCH if h.core or len(h.terms) <= 4 else HEDGE_MATCH
    if _overlap(h.terms, s.terms) < share:
        return False
    # the parts of a name are not its words ("update_str_printer.py: edited" says nothing of a "str printer"), and
    # another name is another thing (sympy.printing.str is not sympy.printing.latex)
    names, said = _names(h.text), _names(s.text)
    if names and said and not names & said:
        return False
    return not words or _overlap(words, key_terms(_NAME_TOKEN.sub(" ", s.text))) >= 0.5


def _names(text: str) -> set[str]:
    return {m.group(0).lower() for m in _NAME_TOKEN.finditer(text) if not m.group(0).isdigit()}


def _confirms(plain: _Statement, hedged: _Statement) -> bool:
    later = plain.index is not None and hedged.index is not None and plain.index > hedged.index
    return later and _overlap(hedged.terms, plain.terms) >= INVERT_MATCH


#: words that say little of what a hedge is about ("too", "used": "add", as the constraints read it)
_FILLER = frozenset({"too", "also", "just", "very", "really", "only", "add", "still", "even", "now"})


def _is_list(text: str) -> bool:
    """A line that lists names ("Identifiers: User object (1), setting cache, outer_user, __get__, ..."): it claims
    nothing, so it restates no hedge."""
    items = [item.split() for item in re.split(r"[,，、]", text)]
    return len(items) >= 4 and sorted(len(words) for words in items)[len(items) // 2] <= 3


_CODE_BLOCK = re.compile(r"```.*?(?:```|\Z)", re.S)
#: a line that renders a tool call ("- (#211) bash({"command": "rm apply_fix.py"}): …"): what was run and what it
#: printed, not a restatement of anything the agent supposed
_CALL_LINE = re.compile(r"^[\s\-*•]*(?:\(#\d+\)\s*)?[A-Za-z_][\w.-]*\(\{")
#: such a line's result part (group 1): what the tool printed
_CALL_RESULT = re.compile(_CALL_LINE.pattern + r".*?\}\)\s*[:：]\s*(.+)$")


def _check_hedges(messages: Sequence[dict[str, Any]], prose: list[_Statement]) -> list[DriftFinding]:
    hedged: list[list[_Statement]] = []
    plain: list[_Statement] = []
    for index, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("assistant", "user") or is_summary_message(m):
            continue
        # (code the agent wrote hedges nothing: 'print("Could not find loop")')
        for sentence in split_sentences(_CODE_BLOCK.sub(" ", windowed(content_text(m), 6_000, 4_000))):
            if _HEDGE.search(sentence):
                hedged.append(_hedged(sentence, index))
            else:
                plain.append(_Statement(sentence, index, key_terms(sentence)))
    findings = []
    corpus: str | None = None
    for units in hedged:
        for h in units:
            # two words are too few to know a sentence repeats the claim ("Or maybe the output is too large")
            if len(h.terms - _FILLER) < 3:
                continue
            # confirmed later without a hedge: the summary may state it plainly
            if any(_confirms(p, h) for p in plain):
                continue
            about = [s for s in prose if _about_hedge(h, s) and not _is_list(s.text) and not _CALL_LINE.match(s.text)]
            if about:
                # a line quoted whole from the originals (a tool's error, the agent's later finding) drops nothing
                corpus = corpus if corpus is not None else _corpus(messages)
                about = [s for s in about if not _verbatim(s.text, corpus)]
            if about and not any(_HEDGE_KEPT.search(s.text) for s in about):
                findings.append(
                    DriftFinding(
                        "hedge_lost",
                        "medium",
                        {"original": h.text, "summary": about[0].text},
                        h.index,
                        "hedge_dropped",
                    )
                )
                break
    return findings


# ---------------------------------------------------------------- claims of progress

#: verbs of a claim that something was done, and the concept each one claims (see :data:`_LEXICON`)
_CLAIM_VERBS = {
    "executed": "run",
    "ran": "run",
    "run": "run",
    "applied": "run",
    "deployed": "deploy",
    "released": "deploy",
    "published": "deploy",
    "shipped": "deploy",
    "pushed": "deploy",
    "migrated": "migrat",
    "modified": "modify",
    "changed": "modify",
    "updated": "modify",
    "edited": "modify",
    "rewritten": "modify",
    "patched": "modify",
    "fixed": "fix",
    "resolved": "fix",
    "committed": "commit",
    "merged": "merg",
    "restarted": "restart",
    "refunded": "refund",
    "cancelled": "cancel",
    "canceled": "cancel",
    "upgraded": "upgrad",
    "deleted": "delet",
    "removed": "delet",
    "added": "add",
    "installed": "add",
    "renamed": "renam",
    "split": "split",
    "extracted": "split",
    "created": "creat",
    "sent": "send",
    "booked": "book",
    "completed": "complet",
    "finished": "complet",
    "called": "run",
    "invoked": "run",
    "succeeded": "complet",
    "done": "complet",
    "charged": "pay",
    "rolled back": "rollback",
    "reverted": "rollback",
}
_CLAIM_ZH = {
    "执行": "run",
    "运行": "run",
    "部署": "deploy",
    "发布": "deploy",
    "上线": "deploy",
    "迁移": "migrat",
    "修改": "modify",
    "更新": "modify",
    "修复": "fix",
    "解决": "fix",
    "提交": "commit",
    "合并": "merg",
    "重启": "restart",
    "退款": "refund",
    "取消": "cancel",
    "升级": "upgrad",
    "删除": "delet",
    "添加": "add",
    "引入": "add",
    "重命名": "renam",
    "改名": "renam",
    "拆分": "split",
    "创建": "creat",
    "发送": "send",
    "预订": "book",
    "完成": "complet",
    "回滚": "rollback",
    "替换": "replac",
}
_CLAIM_VERB = "|".join(sorted((re.escape(v).replace(r"\ ", r"\s+") for v in _CLAIM_VERBS), key=len, reverse=True))
_CLAIM_VERB_ED = "|".join(re.escape(v).replace(r"\ ", r"\s+") for v in _CLAIM_VERBS if v.endswith("ed") or " " in v)
_ADVERBS = r"(?:(?:now|already|successfully|also|just|all|fully|been|finally|then)\s+)*"
_CLAIM_EN = re.compile(
    rf"\b(?:has|have|had|was|were|is|are|got|been)\s+{_ADVERBS}(?P<a>{_CLAIM_VERB})\b"
    rf"|\b(?:successfully|already)\s+(?P<b>{_CLAIM_VERB})\b"
    rf"|\b(?:i|we|agent|assistant)\s+{_ADVERBS}(?P<c>{_CLAIM_VERB})\b"
    # "Migration executed on staging.", "Done: NO6JO3 now departs ..."
    rf"|^\W*(?:the\s+)?(?:[\w./`'()-]+\s+){{0,4}}?(?P<d>{_CLAIM_VERB_ED})\b(?!\s+(?:by|the|a|an|it|that|this)\b)"
    r"|^\W*(?P<e>done|completed|fixed)\b",
    re.I,
)
# the work claimed finished, in words that carry a negation: "no further action is required", "无需进一步操作"
_ALL_DONE = re.compile(
    r"\bno\s+(?:further|more|other)\s+(?:actions?|work|steps?|changes?)\s+(?:is\s+|are\s+)?(?:required|needed|necessary)\b"
    r"|\bnothing\s+(?:else|more|left)\s+(?:to\s+do|is\s+(?:required|needed))\b"
    r"|无需(?:进一步|其他|更多|再)(?:的)?(?:操作|处理|行动|修改)|没有(?:其他|更多)?需要(?:做|处理)的",
    re.I,
)
_CLAIM_ZH_RE = re.compile(
    r"(?:已经?|均已|都已|全部已?)(?!批准|同意|确认|授权|要求|决定|计划|准备|安排|知道|了解|记录)(?:成功)?"
    r"[^，。；：,;:！？!?]{0,10}?(?P<a>" + "|".join(_CLAIM_ZH) + ")"
    r"|(?P<b>" + "|".join(_CLAIM_ZH) + r")(?:成功|完成|完毕|好了)"
)
# test results claimed: "tests passed", "all 49 tests pass", "exit code 0", "测试通过", "退出码 0"
_TESTS_PASSED = re.compile(
    r"\btests?\s+(?:(?:now|all|have|has|were|are|again)\s+)*pass(?:ed|es|ing)?\b|\ball\s+(?:\d+\s+)?tests?\s+pass"
    r"|\b(?P<n>\d+)\s+(?:tests?\s+)?passed\b(?!\s*,?\s*\d+\s+failed)|\bexit\s+code\s+(?:is\s+|was\s+|of\s+)?0\b"
    r"|\ball\s+green\b|(?:测试|用例)[^，。；]{0,6}?(?:全部|都|均|已)?通过|退出码\s*[为是:：]?\s*0(?!\d)",
    re.I,
)
# a result of a test run, in tool output (pytest, unittest, go test, jest)
_TEST_RESULT = re.compile(
    r"\b\d+\s+(?:passed|failed)\b|\bFAILED\b|^OK\b|\bRan\s+\d+\s+tests?\b|\bTests?:\s+\d+|^(?:PASS|FAIL)\s", re.M
)
_TEST_FAILED = re.compile(r"\b[1-9]\d*\s+(?:failed|errors?)\b|\bFAILED\b|\bFAIL\b|失败")
_EXIT_ZERO_CLAIM = re.compile(
    r"\bexit\s+(?:code|status)\s*[:=]?\s*0\b|\breturn\s*code\s*[:=]?\s*0\b|<returncode>\s*0\s*</returncode>"
    r"|退出码\s*[:：为是]?\s*0(?!\d)",
    re.I,
)
# a result that is no success
_FAILED_RESULT = re.compile(
    r"\b(?:error|exception|traceback|failed|failure|fatal|refused|denied|not\s+found|unavailable|not\s+available"
    r"|cannot|can'?t|timed?\s*out)\b|失败|错误|报错|拒绝|异常",
    re.I,
)
# "not", "never", "pending", "没有", "未", "尚未": a statement that the thing was not done
_NOT_DONE = re.compile(
    r"\b(?:not|never|no|nothing|none|neither|nor|without|pending|yet\s+to|still\s+(?:needs?|open|failing|fails|to)"
    r"|untouched|unchanged|remains?|failed|fails|over|exceeds?|prevent(?:s|ed|ing)?|from\s+being)\b|n't\b"
    r"|没|未|尚未|还没|仍|还在|待|失败|超过|不",
    re.I,
)
# a plan or a condition, not a claim: "should be executed", "will be deployed", "if it was fixed"
_NOT_A_CLAIM = re.compile(
    r"\b(?:will|would|should|must|need(?:s|ed)?\s+to|needs?|to\s+be|going\s+to|plan\w*|next|if|once|after|before"
    r"|when|whether|until|unless|asked|wants?|wanted|requested|expected|can|could)\b|[?？]"
    r"|将|会|要|需要|计划|准备|下一步|如果|是否|之后|以后|等|请|让|要求|吗",
    re.I,
)
_LIMIT_NOW = re.compile(
    r"\b(?:is|are)\s+now\s+(?:all\s+)?(?:≤|<=|<|under|below|within|at\s+most|less\s+than|fewer\s+than)\s*\d"
    r"|\bnow\s+(?:all\s+)?(?:≤|<=|under|below|within)\s*\d|现在[^，。；]{0,12}(?:不超过|以内|以下|≤|<=|少于)",
    re.I,
)


# "I'll try to modify it to print without …": what the agent sets out to do says nothing of what was done
_TRYING = re.compile(
    r"\b(?:i'll|i\s+will|we'll|let\s+me|let's|try(?:ing)?\s+to|going\s+to)\b|我来|我先|试着|尝试", re.I
)
# the agent's next step, in its own words: "I'll split the sorting out of it next", "next I will run …"
_PLAN = re.compile(
    r"\b(?:i'll|i\s+will|i'm\s+going\s+to|i\s+am\s+going\s+to|next,?\s+i)\b|我(?:接下来|下一步|会|将|再)", re.I
)
# "I failed to update the signature correctly in apply_fix.py": it was done, wrongly
_DONE_WRONG = re.compile(r"\b(?:correctly|properly)\b|正确", re.I)
_QUESTION = re.compile(r"[?？]|吗|\b(?:if|whether)\b", re.I)


@dataclass
class _Event:
    """A message of the archive as evidence about a claim: what it says was done, or not done."""

    index: int
    text: str
    done: bool  # True: support; False: a statement that it was not done


def _claim_concepts(clause: str) -> set[str]:
    """The actions ``clause`` claims as done ("has been executed" -> run); empty when it claims nothing."""
    concepts: set[str] = set()
    if _ALL_DONE.search(clause) and not _HEDGE_KEPT.search(clause):
        return {"complet"}
    if _NOT_A_CLAIM.search(clause) or _NOT_DONE.search(clause) or _HEDGE_KEPT.search(clause):
        return concepts
    for m in _CLAIM_EN.finditer(clause):
        verb = re.sub(r"\s+", " ", next(g for g in m.groups() if g).lower())
        concepts.add(_CLAIM_VERBS.get(verb, "complet"))
    if _CJK.search(clause):
        for m in _CLAIM_ZH_RE.finditer(_normalize(clause)):
            concepts.add(_CLAIM_ZH.get(m.group("a") or m.group("b"), "complet"))
    return concepts


_TEST_FAIL_WORDS = re.compile(r"\bfail(?:s|ed|ing|ures?)?\b|失败|未通过|没通过|没有通过|不通过", re.I)
_TEST_WORDS = re.compile(r"\btests?\b|\bpytest\b|\bsuite\b|测试|用例", re.I)


def _latest_tests(messages: Sequence[dict[str, Any]]) -> tuple[bool | None, int | None, str]:
    """(did the last test run pass, its index, its line) over the tool results of ``messages`` and what the
    assistant said of them (None: no run)."""
    result: tuple[bool | None, int | None, str] = (None, None, "")
    for index, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("tool", "assistant"):
            continue
        text = content_text(m)
        if m.get("role") == "assistant":
            for sentence in split_sentences(text[-3_000:]):
                if not _TEST_WORDS.search(sentence) and not _TESTS_PASSED.search(sentence):
                    continue
                for clause in _clauses(sentence):
                    if _TEST_FAIL_WORDS.search(clause):
                        result = (False, index, sentence)
                    elif _TESTS_PASSED.search(clause) and not _NOT_A_CLAIM.search(clause):
                        result = (True, index, sentence)
            continue
        tail = text[-3_000:]
        if _TEST_RESULT.search(tail):
            lines = [line for line in tail.splitlines() if _TEST_RESULT.search(line)]
            result = (not _TEST_FAILED.search(tail), index, lines[-1].strip(" =") if lines else "")
    return result


_DRY_RUN = re.compile(r"--dry-run|\bdiff\b|\bplan\b|--check\b|--what-if\b|--noop\b|\bdescribe\b|\bget\s+pods\b", re.I)
_WRITE_TOOL = re.compile(r"write|edit|patch|apply|create|replace|sed\s+-i|update|modify|rename|git\s+mv|mv\s", re.I)
#: a call that runs something: "./scripts/migrate.sh staging 0042_add_index", "python reproduce.py"
_EXECUTES = re.compile(
    r"(?:^|[\s\"'])(?:\./[\w./-]+|[\w./-]+\.(?:sh|py)\b|(?:ba)?sh\s|python\d?\s|node\s|pytest\b|make\s|psql\b"
    r"|npm\s+run|kubectl\s+(?:apply|rollout|exec)|helm\s+(?:upgrade|install|rollback))"
)
_READS = re.compile(r"(?:^|[\s\"'])(?:cat|less|head|tail|grep|rg|ls|wc|sed\s+-n|git\s+(?:show|log|diff))\s")
#: concepts a write tool call supports when it names the object
_BY_WRITING = frozenset({"modify", "fix", "split", "renam", "add", "creat", "delet", "replac", "complet"})


_ADVERB_WORDS = frozenset(
    {_stem(w) for w in ("successfully", "already", "now", "been", "also", "just", "all", "finally")} | {"done"}
)


_CITATION = re.compile(r"\(?#\d+(?:\s*[-–,]\s*#?\d+)*\)?")


def _claim_objects(text: str, concept: str) -> tuple[set[str], set[str]]:
    """What a claim is about: (its bridge terms, its own terms), without the claimed action."""
    drop = _ADVERB_WORDS | {concept} | {_stem(v) for v, c in _CLAIM_VERBS.items() if c == concept}
    text = _CITATION.sub(" ", text)
    bridge = {t for t in bridge_terms(text) if len(t) > 1} - drop
    own = {t for t in key_terms(text) if not (len(t) == 1 and _CJK.match(t))} - drop - _VERBS
    return bridge, own


def _events(messages: Sequence[dict[str, Any]], claim: str, concept: str) -> list[_Event]:
    """What the archive says about ``concept`` done to what ``claim`` names, in message order."""
    bridge, own = _claim_objects(claim, concept)
    ids = _terms(claim)[1]
    # "$205 has been charged": support names the amount too
    amounts = [m.group(1) or m.group(2) for m in _AMOUNT.finditer(claim)]

    def names_amounts(text: str) -> bool:
        return all(_has_number(text, a.replace(",", "")) for a in amounts)

    events = []
    for index, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant") or is_summary_message(m):
            continue
        text = content_text(m)
        if not text.strip():
            continue
        previous = ""
        for sentence in split_sentences(windowed(text, 6_000, 4_000)):
            for clause in _clauses(sentence):
                cross = _cross(claim, clause)
                hay = set(_hay(clause)) | (set() if cross else key_terms(clause))
                # across languages: the concepts, and the words both write alike ("helm", "redis")
                objects = bridge | (own & hay) if cross else own
                share = _overlap(objects, hay)
                words = objects - ids
                # "迁移没有执行" says the migration was not run, without its id
                # (a clause naming other identifiers is about something else: "the return HAT211 is unchanged")
                other_ids = _terms(clause)[1]
                about_other = bool(other_ids) and bool(ids) and not other_ids & ids
                if (
                    words
                    and _NOT_DONE.search(clause)
                    and concept in hay
                    and _overlap(words, hay) >= 0.3
                    and not about_other
                ):
                    if not (_QUESTION.search(clause) or _TRYING.search(clause) or _DONE_WRONG.search(clause)):
                        events.append(_Event(index, sentence, False))
                    continue
                # "I'll split the sorting out of it next", said with no call or command that does it: as the agent
                # says it, not done yet (the sentence before may name the object: "group_by_customer is 44 lines.
                # I'll split …"); "I'll try to …" is an attempt under way
                near = previous + " " + clause
                if (
                    m.get("role") == "assistant"
                    and not (tool_calls_of(m) or "```" in text)
                    and _PLAN.search(clause)
                    and not re.search(r"\btry(?:ing)?\s+to\b", clause, re.I)
                    and concept in hay
                    and not _QUESTION.search(clause)
                    and _overlap(objects, set(_hay(near)) | key_terms(near)) >= MATCH
                ):
                    events.append(_Event(index, sentence, False))
                    continue
                if not objects or share < (1.0 if len(objects) == 1 else MATCH):
                    continue
                claimed = _claim_concepts(clause)
                if (concept in claimed or (concept == "complet" and claimed)) and names_amounts(text):
                    events.append(_Event(index, sentence, True))
                elif _NOT_DONE.search(clause):
                    if concept in hay and not (
                        _QUESTION.search(clause) or _TRYING.search(clause) or _DONE_WRONG.search(clause)
                    ):
                        events.append(_Event(index, sentence, False))
                elif (
                    m.get("role") == "assistant"
                    and not cross  # across languages only the concepts compare: a state is no action
                    and share >= INVERT_MATCH
                    and not _NOT_A_CLAIM.search(clause)
                    and names_amounts(text)
                ):
                    events.append(_Event(index, sentence, True))  # the assistant states it, in other words
            previous = sentence
    for index, call, result in _calls(messages):
        hay = set(_hay(call)) | key_terms(call[:2_000])
        objects = bridge if _cross(claim, call) else own | bridge
        if not objects or _overlap(objects, hay) < (1.0 if len(objects) == 1 else MATCH):
            continue
        failed = bool(result) and bool(_FAILED_RESULT.search(result[:2_000])) and not _EXIT_ZERO_CLAIM.search(result)
        if _DRY_RUN.search(call):  # "helm diff upgrade", "--dry-run": looked at, not done
            continue
        runs = concept == "run" and _EXECUTES.search(call) and not _READS.search(call)
        if concept in hay or (concept in _BY_WRITING and _WRITE_TOOL.search(call)) or runs:
            if failed or names_amounts(call + "\n" + result):
                events.append(_Event(index, call[:200], not failed))
        elif failed and not (concept in _BY_WRITING and not _WRITE_TOOL.search(call)):
            # the call on it failed, whatever it was called (not a run of a file claimed written: "edited
            # reproduce_issue.py" stands when running it raises)
            events.append(_Event(index, result[:200], False))
    events.sort(key=lambda e: e.index)
    return events


#: an amount of money: "$205", "205 USD", "329 元"
_AMOUNT = re.compile(r"[$€£¥]\s?(\d[\d,]*(?:\.\d+)?)|(\d[\d,]*(?:\.\d+)?)\s?(?:USD|EUR|CNY|RMB|dollars|元|块钱)")


_LINE_COUNT = re.compile(r"\s*[(（]\d+\s*(?:lines?|行)[)）]\s*$")


def _check_progress(messages: Sequence[dict[str, Any]], prose: list[_Statement]) -> list[DriftFinding]:
    """Claims of progress or completion that nothing in the archive supports ("the migration has been executed"
    when it was only approved; "tests passed" when the last run failed)."""
    findings: list[DriftFinding] = []
    tests: tuple[bool | None, int | None, str] | None = None
    corpus = ""

    @lru_cache(maxsize=1)
    def tools() -> str:
        return "\n".join(content_text(m) for m in messages if isinstance(m, dict) and m.get("role") == "tool")

    for s in prose:
        for clause in _whole(s):
            text = clause.text
            if _NOT_A_CLAIM.search(text) or _HEDGE_KEPT.search(text):
                continue
            passed = _TESTS_PASSED.search(text)
            if passed and not _NOT_DONE.search(text):
                if tests is None:
                    tests = _latest_tests(messages)
                    corpus = _corpus(messages)
                ok, index, line = tests
                number = passed.group("n")
                if number and re.search(rf"\b{number}\s+passed\b", corpus):
                    continue
                # a line of a tool's output copied whole ("[exit code 0]" of the baseline run): stale, no claim
                if re.search(rf"^\s*{re.escape(s.text.strip())}\s*$", tools(), re.M):
                    continue
                if _EXIT_ZERO_CLAIM.search(text) and not (ok or _EXIT_ZERO_CLAIM.search(corpus)):
                    ok = False
                if not ok:
                    code = "tests_not_passed" if ok is False else "tests_never_run"
                    findings.append(
                        DriftFinding(
                            "progress_fabricated",
                            "high" if ok is False else "medium",
                            {"original": line, "summary": s.text},
                            index,
                            code,
                        )
                    )
                    break
                continue
            if _LIMIT_NOW.search(text):
                finding = _check_limit_claim(messages, s, text)
                if finding:
                    findings.append(finding)
                    break
                continue
            concepts = _claim_concepts(text)
            if not concepts:
                continue
            # a tool's own line ("1 queries executed, 0 expected"), alone or after its call ("(#41) send_message({…}):
            # 消息已发送给 小王"), is a quote, not a claim
            call = _CALL_RESULT.match(s.text)
            quote = _LINE_COUNT.sub("", call.group(1) if call else s.text).strip(" -.…")
            if (len(quote) >= 20 or (call and len(quote) >= 6)) and quote in tools():
                break
            if _ALL_DONE.search(text):
                # the whole work claimed finished: so the agent's last words say
                if not _ends_done(messages):
                    evidence = {"original": "", "summary": s.text}
                    findings.append(DriftFinding("progress_fabricated", "low", evidence, None, "progress_unsupported"))
                    break
                continue
            finding = None
            for concept in sorted(concepts):
                # a clause that names too little ("edited (#8)") is read with its sentence
                about = text if len(_claim_objects(text, concept)[1]) >= 2 else s.text
                events = _events(messages, about, concept)
                if events and events[-1].done:
                    continue
                against = next((e for e in reversed(events) if not e.done), None)
                # nothing shows it: a note (the archive may say it in words no check reads); the archive
                # saying it was not done: serious
                finding = DriftFinding(
                    "progress_fabricated",
                    "high" if against else "low",
                    {"original": against.text if against else "", "summary": s.text},
                    against.index if against else None,
                    "progress_contradicted" if against else "progress_unsupported",
                )
                break
            if finding:
                findings.append(finding)
                break
    return findings


def _ends_done(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether the agent's last words (its last message with text) claim the work done."""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "assistant" and content_text(m).strip():
            return any(_claim_concepts(c) for s in split_sentences(content_text(m)[-2_000:]) for c in _clauses(s))
    return False


def _check_limit_claim(messages: Sequence[dict[str, Any]], s: _Statement, clause: str) -> DriftFinding | None:
    """ "each function is now ≤ 40 lines": supported only by an assistant saying so, not by the user's limit."""
    numbers = set(_DIGITS.findall(clause))
    terms = set(_hay(clause)) - numbers
    against = None
    for index, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        for sentence in split_sentences(content_text(m)):
            if not numbers & set(_DIGITS.findall(sentence)):
                continue
            if _overlap(terms, set(_hay(sentence))) < MATCH:
                continue
            denied = _NOT_DONE.search(sentence) or _NOT_A_CLAIM.search(sentence)
            against = (index, sentence) if denied else None
    if against is None and any(
        isinstance(m, dict) and m.get("role") == "assistant" and numbers & set(_DIGITS.findall(content_text(m)))
        for m in messages
    ):
        return None
    return DriftFinding(
        "progress_fabricated",
        "high" if against else "medium",
        {"original": against[1] if against else "", "summary": s.text},
        against[0] if against else None,
        "progress_contradicted" if against else "progress_unsupported",
    )


def _flat_line(text: str) -> str:
    return text.strip().lstrip("-* ").rstrip("。.;；")


def _with_aliases(prose: list[_Statement], messages: Sequence[dict[str, Any]]) -> list[_Statement]:
    """``prose`` where a sentence names a file by the Chinese name a user gave it ("税率表那边
    billing/rates_cache.py 不要动" -> "不要动税率表缓存文件") also holds the file's terms."""
    aliases: dict[str, frozenset[str]] = {}
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "user" and not is_summary_message(m):
            for name, path in _file_names(user_statement_text(content_text(m))):
                aliases.setdefault(name, frozenset(_terms(path)[0]))
    if not aliases:
        return prose

    def named(text: str, terms: set[str]) -> set[str]:
        extra = set().union(*(path for name, path in aliases.items() if name in text))
        return terms | extra if extra - terms else terms

    out = []
    for st in prose:
        terms = named(st.text, st.terms)
        if terms is st.terms:
            out.append(st)
            continue
        clauses = [replace(c, terms=named(c.text, c.terms)) for c in st.clauses]
        out.append(replace(st, terms=terms, clauses=clauses))
    return out


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
    parts = _corpus_parts(original_messages)
    corpus = "\n".join(parts)
    # by message, not as one text: each message is parsed once across the checks of a history (a re-summarize)
    corpus_terms = frozenset().union(*(_frozen_terms(part)[0] for part in parts))
    # the summarizer's own rules copied into the summary are an invented rule, and no evidence of anything else
    sentences = _prose_sentences(prose_text)
    copied = {s.text for s in sentences if _copies_instructions(s.text, corpus_terms)}
    findings: list[DriftFinding] = [
        DriftFinding("constraint_fabricated", "medium", {"original": "", "summary": s.text}, None, "instruction_copied")
        for s in sentences
        if s.text in copied
    ]
    history = [*original_messages, *(context_messages or ())]
    prose = _with_aliases([s for s in sentences if s.text not in copied], history)
    constraints, approvals = _user_statements(original_messages)
    # a prose sentence quoting a user's own constraint or approval verbatim (a kept user turn) is no
    # evidence against another one: "No function may be longer than 50 lines." does not break "under 50"
    quoted = [st.text for st in constraints + approvals if len(st.text) >= 8]
    # (a sentence that is mostly the quote: one that also restates other rules still counts for them)
    checked = [st for st in prose if not any(q in st.text and len(q) * 5 >= len(st.text) * 3 for q in quoted)]
    echoes = _echo_index(prose, original_messages)
    for c in constraints:
        finding = _check_constraint(c, checked, pinned, summary_text, echoes)
        if finding:
            findings.append(finding)
    for a in approvals:
        finding = _check_approval(a, checked, summary_text)
        if finding:
            findings.append(finding)
    for r in _user_turns(original_messages)[2]:
        finding = _check_request(r, prose, summary_text)
        if finding:
            findings.append(finding)
    if context_messages:
        findings += _check_context(context_messages, prose, pinned, summary_text, constraints + approvals)
        corpus = corpus + "\n" + _corpus(context_messages)
        extra_c, extra_a = _user_statements(context_messages)
        constraints, approvals = constraints + extra_c, approvals + extra_a
    findings += _check_fabricated(prose, pinned, constraints, approvals, corpus, frozenset(_rule_sentences(prose_text)))
    findings += _check_wishes(history, prose)
    findings += _check_identifiers(original_messages, summary_text, corpus)
    findings += _check_hedges(original_messages, prose)
    findings += _check_progress(original_messages, checked)
    findings += _check_tool_errors(original_messages, summary_text)
    findings += _check_no_errors(original_messages, checked)
    findings += _check_attribution(original_messages, checked)
    findings += _check_causes(history, checked)
    findings += _check_placement(original_messages, prose_text)
    findings += _check_test_outcomes(original_messages, prose_text)
    findings += _check_call_speaker(prose_text, corpus)
    findings += _check_roles(original_messages, prose_text)
    findings += _check_log_lines(original_messages, prose_text)
    findings += _check_breaches(original_messages, constraints, summary_text)
    findings += _check_values(original_messages, prose_text)
    findings += _check_protected(original_messages, constraints, prose_text)
    # a change made in another file and put on a protected one is misplaced, not the prohibition inverted
    moved = [f.evidence["summary"] for f in findings if f.code == "change_misplaced"]
    findings = [
        f
        for f in findings
        if not (f.kind == "constraint_inverted" and any(_flat_line(f.evidence["summary"]) in m for m in moved))
    ]
    # a constraint the summary inverts is not also dropped
    inverted = {f.evidence["original"] for f in findings if f.kind == "constraint_inverted"}
    findings = [f for f in findings if not (f.kind == "constraint_dropped" and f.evidence["original"] in inverted)]
    # a line another check already places wrongly is not reported twice
    placed = [f.evidence["summary"] for f in findings if f.kind == "wrong_attribution"]
    findings += [
        f for f in _check_pairs(original_messages, prose_text) if not any(f.evidence["summary"] in p for p in placed)
    ]
    findings += _check_constraint_objects(original_messages, constraints, summary_text)
    rank = {"high": 0, "medium": 1, "low": 2}
    findings.sort(key=lambda f: (rank.get(f.severity, 3), f.source_index if f.source_index is not None else -1))
    return findings


def _check_context(
    context: Sequence[dict[str, Any]], prose: list[_Statement], pinned: str, summary: str, seen: list[_Statement]
) -> list[DriftFinding]:
    """Inversions of constraints said outside the segment (they stay verbatim, so dropping them is fine)."""
    known = {s.text for s in seen}
    constraints, approvals = _user_statements(context)
    echoes = _echo_index(prose, context)
    findings = []
    for c in constraints:
        finding = None if c.text in known else _check_constraint(c, prose, pinned, summary, echoes)
        if finding and finding.kind == "constraint_inverted":
            findings.append(replace(finding, scope="context"))
    for a in approvals:
        finding = None if a.text in known else _check_approval(a, prose, summary)
        if finding and finding.kind == "constraint_inverted":
            findings.append(replace(finding, scope="context"))
    return findings
