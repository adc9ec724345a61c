"""QTI 2.1 (Canvas New Quizzes, Blackboard Ultra): an IMS content package (zip).

One ``assessmentItem`` per variant, every asked entry a ``textEntryInteraction`` in
its table cell with a ``float`` response whose ``correctResponse`` is the key's
certified rounding (an exact decimal string).  Response processing gives a point for
each answer within half a unit in the last asked place of it (``equal`` with
``toleranceMode="absolute"``, the tolerance an exact decimal string) or of the
reader-rounding answer, and scales the sum to 0..1.  ``imsmanifest.xml`` lists the
items as ``imsqti_item_xmlv2p1`` resources.
"""

from __future__ import annotations

import html
import io
import zipfile

from symformer.lms.question import Blank, Question, question_html
from symformer.lms.tolerances import tolerance_text

QTI_NS = "http://www.imsglobal.org/xsd/imsqti_v2p1"
CP_NS = "http://www.imsglobal.org/xsd/imscp_v1p1"
#: A fixed time for every zip member: the same exercise gives the same bytes.
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)


def response_id(b: Blank) -> str:
    """A blank's response identifier: ``RESPONSE_07``."""
    return f"RESPONSE_{b.number:02d}"


def _xhtml(text: str) -> str:
    """The question's HTML as XHTML (QTI's item body): void elements closed."""
    return text.replace("<br>", "<br/>")


def _condition(b: Blank, tol: str) -> str:
    rid = response_id(b)
    tests = [f'<equal toleranceMode="absolute" tolerance="{tol} {tol}">'
             f'<variable identifier="{rid}"/><correct identifier="{rid}"/></equal>']
    if b.reader is not None:
        tests.append(f'<equal toleranceMode="absolute" tolerance="{tol} {tol}">'
                     f'<variable identifier="{rid}"/>'
                     f'<baseValue baseType="float">{b.reader}</baseValue></equal>')
    test = tests[0] if len(tests) == 1 else "<or>" + "".join(tests) + "</or>"
    return (f"<responseCondition><responseIf><and><not><isNull><variable identifier="
            f'"{rid}"/></isNull></not>{test}</and><setOutcomeValue identifier="RAW">'
            f'<sum><variable identifier="RAW"/><baseValue baseType="float">1</baseValue>'
            f"</sum></setOutcomeValue></responseIf></responseCondition>")


def item_xml(q: Question, asked: list[str], identifier: str) -> str:
    """One variant's assessmentItem."""
    tol = tolerance_text(q.decimals)
    body = question_html(q, lambda b: f'<textEntryInteraction responseIdentifier='
                                      f'"{response_id(b)}" expectedLength="8"/>', asked)
    declarations = "\n".join(
        f'  <responseDeclaration identifier="{response_id(b)}" cardinality="single" '
        f'baseType="float"><correctResponse><value>{b.exact}</value></correctResponse>'
        "</responseDeclaration>" for b in q.blanks)
    conditions = "\n".join("    " + _condition(b, tol) for b in q.blanks)
    count = max(1, len(q.blanks))
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<assessmentItem xmlns="{QTI_NS}" identifier="{identifier}" '
            f'title="{html.escape(f"{q.vid}: {q.title}")}" adaptive="false" '
            f'timeDependent="false">\n{declarations}\n'
            '  <outcomeDeclaration identifier="RAW" cardinality="single" baseType="float">'
            "<defaultValue><value>0</value></defaultValue></outcomeDeclaration>\n"
            '  <outcomeDeclaration identifier="SCORE" cardinality="single" '
            'baseType="float" normalMaximum="1"><defaultValue><value>0</value>'
            "</defaultValue></outcomeDeclaration>\n"
            f"  <itemBody>\n<div>{_xhtml(body)}</div>\n  </itemBody>\n"
            f"  <responseProcessing>\n{conditions}\n"
            '    <setOutcomeValue identifier="SCORE"><divide><variable identifier="RAW"/>'
            f'<baseValue baseType="float">{count}</baseValue></divide></setOutcomeValue>\n'
            "  </responseProcessing>\n</assessmentItem>\n")


def manifest_xml(items: list[tuple[str, str]]) -> str:
    """``imsmanifest.xml``: one resource per item (identifier, file)."""
    resources = "\n".join(
        f'    <resource identifier="{ident}" type="imsqti_item_xmlv2p1" href="{href}">'
        f'<file href="{href}"/></resource>' for ident, href in items)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<manifest xmlns="{CP_NS}" '
            f'identifier="symformer-manifest">\n  <metadata><schema>QTIv2.1 Package'
            f"</schema><schemaversion>1.0.0</schemaversion></metadata>\n"
            f"  <organizations/>\n  <resources>\n{resources}\n  </resources>\n"
            f"</manifest>\n")


def qti_package(questions: list[Question], asked: list[str], prefix: str) -> bytes:
    """The content package: ``imsmanifest.xml`` and one item file per variant."""
    items = [(f"{prefix}-{q.vid}", f"items/{prefix}-{q.vid}.xml") for q in questions]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        def add(name: str, text: str) -> None:
            z.writestr(zipfile.ZipInfo(name, _ZIP_TIME), text.encode("utf-8"),
                       compress_type=zipfile.ZIP_DEFLATED)
        add("imsmanifest.xml", manifest_xml(items))
        for q, (ident, href) in zip(questions, items):
            add(href, item_xml(q, asked, ident))
    return buffer.getvalue()
