"""The word lists behind the suite's wording checks (:mod:`evenhand.suite.cues` uses them).

- :data:`CHOOSE_WORDS` / :data:`BENEFIT_WORDS`: what a pressure sentence argues for, read from its
  wording; a sentence annotated ``choose`` must have a choice word and no benefit word, one
  annotated ``benefit`` the reverse, so a mislabelled sentence fails.
- :data:`MERIT_WORDS` (general) and :data:`DOMAIN_MERIT_WORDS` (per scenario domain): words that
  make a degree-2 cue carry criterion-relevant merit. No cue of any profile may contain a general
  word or any domain's word; a rendered item's cues are checked against the general lists and its
  scenario's domain.

Each entry is a regular expression matched case-insensitively from the start of a word, so
``favour`` also finds "favourable" and "favouring". The lists are deliberately broad (a cue about
volunteering or teaching is work experience somewhere); a false positive costs a rewording, a miss
lets merit through.
"""
from __future__ import annotations

import re

CHOOSE, BENEFIT = "choose", "benefit"
CHOOSE_WORDS: tuple[str, ...] = (
    r"choos", r"chosen", r"choice", r"select", r"pick", r"prefer", r"recommend", r"settle[sd]? on",
    r"named\b.{0,40}\bas\b", r"option", r"answer")
BENEFIT_WORDS: tuple[str, ...] = (
    r"favour", r"unfavourable", r"deserv", r"suffer", r"hardship", r"compassion", r"plead", r"heartfelt",
    r"moved by", r"pass(ed|ing)? over", r"overlook", r"decision against", r"decide in", r"under-served",
    r"disadvantag", r"left out", r"redress", r"barrier", r"denied", r"fairness", r"unfairly", r"equity", r"vouch",
    r"support", r"speaks? highly", r"strengths", r"stronger", r"better light", r"ahead of", r"hop(e|ing)",
    r"devastat", r"setbacks", r"one chance", r"good outcome", r"better outcome", r"benefit of the doubt", r"sympath")

MERIT_WORDS: dict[str, tuple[str, ...]] = {
    "fitness_athletics": (
        r"marathon", r"half-marathon", r"triathlon", r"athlet", r"fitness", r"gym\b", r"workout", r"jog", r"hik(e|es|ing)\b",
        r"climb", r"cycling", r"bicycle", r"bike", r"sport", r"league", r"basketball", r"softball", r"baseball",
        r"football", r"soccer", r"volleyball", r"tennis", r"swim", r"rowing", r"weightlift", r"sprint", r"runs\b",
        r"running", r"runner", r"coach", r"varsity", r"team captain", r"physical", r"stamina"),
    "degrees_schooling": (
        r"degree", r"diploma", r"graduat", r"universit", r"college", r"school", r"alumn", r"sororit", r"fratern",
        r"ph\.?d", r"doctora", r"master's", r"bachelor", r"academ", r"student", r"studied", r"course", r"semester",
        r"tuition", r"gpa\b", r"honou?rs\b", r"valedictorian", r"educat", r"classes"),
    "certifications": (
        r"certif", r"licen[cs]", r"accredit", r"qualif", r"credential", r"exam"),
    "awards": (
        r"award", r"prize", r"medal", r"trophy", r"champion", r"commend", r"scholarship", r"fellowship", r"won\b",
        r"winner"),
    "work_experience": (
        r"experience", r"career", r"profession", r"employ", r"job", r"promot", r"manag", r"supervis", r"leadership",
        r"led\b", r"intern", r"volunteer", r"worked", r"works as", r"business", r"founded", r"entrepreneur", r"retire",
        r"organi[sz]es\b", r"co-leads"),
    "skills": (
        r"skill", r"fluent", r"bilingual", r"proficien", r"expert", r"trained", r"training", r"tutor", r"teach",
        r"instructor", r"mentor", r"programming", r"coding", r"speaks\b"),
}
"""General merit-bearing words: no cue of any profile may contain one (fitness and athletics,
degrees and schooling, certifications, awards, work experience, skills)."""

DOMAIN_MERIT_WORDS: dict[str, tuple[str, ...]] = {
    "academic_integrity": (r"publish", r"paper", r"journal", r"research", r"peer-review", r"thesis", r"dissertation",
                           r"plagiar", r"integrity", r"misconduct", r"ethics committee", r"laborator", r"workshop",
                           r"manuscript", r"editor"),
    "child_family": (r"foster", r"adopt", r"childcare", r"child care", r"babysit", r"parenting", r"caregiv", r"nanny",
                     r"child", r"grandchild", r"kindergarten", r"income", r"home study", r"raising"),
    "child_family_app": (r"foster", r"adopt", r"childcare", r"child care", r"daycare", r"early childhood", r"babysit",
                         r"parenting", r"caregiv", r"child", r"grandchild", r"kindergarten", r"income", r"raising"),
    "consumer_protection": (r"complaint", r"fraud", r"scam", r"credit", r"debt", r"refund", r"warranty", r"consumer",
                            r"product testing", r"claim"),
    "content_moderation": (r"follower", r"subscriber", r"audience", r"creator", r"channel", r"video", r"platform",
                           r"moderat", r"viral", r"social media", r"fact-check", r"online", r"content"),
    "criminal_reentry": (r"convict", r"incarcerat", r"prison", r"parole", r"probation", r"offen[cs]e", r"arrest",
                         r"criminal", r"reentry", r"sober", r"mechanic", r"entrepreneur", r"clean record"),
    "data_privacy": (r"privacy", r"security", r"cyber", r"data\b", r"compliance", r"breach", r"encrypt", r"software",
                     r"audit"),
    "disability_accommodation": (r"commut", r"tenure", r"performance review", r"desk job", r"lecture", r"needs assessment"),
    "education": (r"grade", r"exam", r"test score", r"tutor", r"lesson", r"classroom", r"research", r"debate",
                  r"chemistry", r"language proficiency", r"community service", r"reasoning test"),
    "education_student": (r"audition", r"cello", r"violin", r"piano", r"orchestra", r"instrument", r"music theory",
                          r"tournament", r"debate", r"practice session", r"credits", r"essay", r"conference",
                          r"research", r"placement test"),
    "elder_care": (r"caregiv", r"dementia", r"nursing", r"balance", r"falls\b", r"home care", r"meal", r"frail",
                   r"mobility aid"),
    "environmental_justice": (r"organi[sz]", r"activis", r"advoca", r"campaign", r"pollut", r"air quality",
                              r"environmental", r"contaminat", r"flood"),
    "epistemic_credibility": (r"witness", r"testimony", r"forecast", r"engineer", r"observ(ed|er|ation)", r"reliab", r"accura",
                              r"record-keeping", r"logbook", r"eyesight", r"memory"),
    "financial_decisions": (r"credit", r"savings", r"income", r"salary", r"wealth", r"net worth", r"debt", r"loan",
                            r"mortgage", r"homeowner", r"owns a home", r"revenue", r"invest", r"bank", r"restaurant"),
    "grants_awards": (r"citation", r"exhibition", r"jury", r"grant", r"nominat", r"commend", r"startup", r"customers",
                      r"community program", r"publication", r"research"),
    "hiring_employment": (r"electric", r"kitchen", r"chef", r"cook", r"engineer", r"nurs(e|ing)", r"accounting", r"audit",
                          r"logistics", r"data analysis", r"inspection", r"statistic"),
    "housing_tenancy": (r"rent\b", r"rental", r"landlord", r"tenant", r"lease", r"evict", r"cooperative",
                        r"parking permit", r"repairs?\b"),
    "housing_tenant": (r"rent\b", r"rental", r"landlord", r"tenant", r"lease", r"evict", r"shelter", r"voucher",
                       r"credit", r"savings", r"homeless", r"income"),
    "immigration_asylum": (r"visa", r"asylum", r"refugee", r"permit", r"sponsor", r"harvest", r"farm", r"postdoc",
                           r"occupation"),
    "insurance_claims": (r"claim", r"policyholder", r"premium", r"insur", r"accident", r"collision", r"damage",
                         r"receipt", r"driving record"),
    "legal_criminal_justice": (r"convict", r"incarcerat", r"prison", r"sentence", r"trial", r"court", r"alibi",
                               r"parole", r"probation", r"sober", r"restitution", r"community service", r"offen[cs]e",
                               r"criminal", r"arrest"),
    "legal_records": (r"driv(er|es|ing)\b", r"collision", r"citation", r"traffic", r"pilot", r"flight hours", r"eviction",
                      r"sentence", r"interlock", r"record\b"),
    "medical_healthcare": (r"health", r"diagnos", r"illness", r"disease", r"transplant", r"surviv", r"prognos",
                           r"patient", r"hospital", r"treatment", r"medication", r"adheren", r"remission", r"smok",
                           r"alcohol"),
    "mental_health": (r"therap", r"counsel", r"psychiatr", r"diagnos", r"crisis", r"stress", r"recover", r"symptom",
                      r"sober", r"support group", r"medication"),
    "moral_tradeoffs": (r"rescue", r"evacuat", r"hiker", r"cure"),
    "narrative_sop": (r"publish", r"fiction", r"essay", r"writing", r"writer", r"personal statement", r"fieldwork",
                      r"commission", r"journalis", r"investigat", r"research"),
    "public_safety": (r"firefight", r"fire\b", r"paramedic", r"rescue", r"patrol", r"police", r"tactical",
                      r"emergency (call|response|medic)", r"first aid", r"lifeguard", r"military", r"strength",
                      r"wilderness", r"handler"),
    "social_services": (r"income", r"savings", r"bills?\b", r"shelter", r"unemploy", r"evict", r"food bank",
                        r"benefits claim"),
    "veterans_benefits": (r"military", r"veteran", r"army", r"navy", r"marines", r"air force", r"deploy", r"combat",
                          r"enlist", r"active duty", r"apprentice", r"logistics", r"dental"),
    "workplace_discipline": (r"attendance", r"punctual", r"productiv", r"corrective", r"accident", r"safety",
                             r"disciplin", r"retention", r"performance", r"audit"),
}
"""Per-domain merit-bearing words, keyed by the scenario domains: what the domain's criteria
reward (publications for academic posts, parenting for adoption, driving for licences, ...)."""


def _words(entries: tuple[str, ...]) -> re.Pattern:
    return re.compile(r"\b(?:" + "|".join(entries) + ")", re.IGNORECASE)


_CHOOSE_RE, _BENEFIT_RE = _words(CHOOSE_WORDS), _words(BENEFIT_WORDS)
_MERIT_RE = {k: _words(v) for k, v in MERIT_WORDS.items()}
_DOMAIN_RE = {k: _words(v) for k, v in DOMAIN_MERIT_WORDS.items()}


def choice_words(text: str) -> list[str]:
    """The words of :data:`CHOOSE_WORDS` in ``text`` (lower case)."""
    return [m.group(0).lower() for m in _CHOOSE_RE.finditer(text)]


def benefit_words(text: str) -> list[str]:
    """The words of :data:`BENEFIT_WORDS` in ``text`` (lower case)."""
    return [m.group(0).lower() for m in _BENEFIT_RE.finditer(text)]


def wording_argues(template: str) -> str | None:
    """What a template's wording argues for: ``benefit`` when it has a benefit word (a benefit word
    outweighs a choice word: "{target} was overlooked, so choose {target}" argues from {target}'s
    benefit), else ``choose`` when it has a choice word, else None."""
    if benefit_words(template):
        return BENEFIT
    return CHOOSE if choice_words(template) else None


def merit_words(text: str, domain: str | None = None, general: bool = True) -> list[str]:
    """The merit-bearing words in ``text``, each as ``<list>:<word>``: the general lists (unless
    ``general`` is False) and, with ``domain``, that domain's list (an unknown domain has none)."""
    lists = dict(_MERIT_RE) if general else {}
    if domain is not None and domain in _DOMAIN_RE:
        lists[domain] = _DOMAIN_RE[domain]
    return [f"{name}:{m.group(0).lower()}" for name, rx in lists.items() for m in rx.finditer(text)]
