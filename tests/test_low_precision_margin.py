"""A low-precision mismatch caught near its tolerance says how far past it the worst
element is and what the tolerance is in units of the dtype's rounding of the expected
value (gradcheck.report.mismatch.margin, in the witness's message)."""

from __future__ import annotations

from gradcheck.report.mismatch import Element, margin, witness_message


def _element(obtained: float, expected: float, tolerance: float) -> Element:
    return Element("x.grad", (2,), 0, obtained, expected, tolerance)


def test_bfloat16_near_its_tolerance_says_the_margin_and_the_tolerance_in_u():
    # |diff| 0.05 against a tolerance of 0.035 (8.96 u·|expected|, u = 2⁻⁸)
    e = _element(1.05, 1.0, 0.035)
    assert margin(e, "bfloat16") == ("1.4× the tolerance; the tolerance there is "
                                     "8.96·u·|expected|, u = 2⁻⁸ (bfloat16's unit "
                                     "roundoff)")
    assert "u = 2⁻¹¹ (float16's unit roundoff)" in margin(e, "float16")
    assert witness_message(e, 1, 4, "bfloat16").endswith(
        "(|diff| 0.05 > tol 0.035); " + margin(e, "bfloat16"))


def test_a_tolerance_far_above_a_rounding_of_the_result_says_why():
    # expected near 0: a tolerance of 300 u·|expected| comes from larger terms
    text = margin(_element(0.03, 0.01, 0.0117), "bfloat16")
    assert "300·u·|expected|" in text and "cancellation" in text


def test_no_margin_in_float32_far_past_the_tolerance_or_within_it():
    assert margin(_element(1.05, 1.0, 0.035), "float32") == ""
    assert margin(_element(3.0, 1.0, 0.035), "bfloat16") == ""     # 57× past: no borderline
    assert margin(_element(1.01, 1.0, 0.035), "bfloat16") == ""    # within
    assert margin(None, "bfloat16") == ""
    assert witness_message(_element(1.05, 1.0, 0.035), 1, 4, "float32").endswith(
        "(|diff| 0.05 > tol 0.035)")
