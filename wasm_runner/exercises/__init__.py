"""Exercises that check a student's code: I/O cases judged on the host, teacher tests judged
by a guest harness that reports over a per-run nonce channel. See docs/exercises.md."""

from .checker import CHECK_MIME, RunSpec, check_code, find_record, harness_program, judge, plan
from .judging import compare_output, redact, summarize
from .model import Exercise, ExerciseError, IOCase, TestFile, load_exercise, load_folder

__all__ = ["Exercise", "ExerciseError", "IOCase", "TestFile", "load_exercise", "load_folder",
           "RunSpec", "plan", "judge", "summarize", "redact", "check_code", "harness_program",
           "compare_output", "find_record", "CHECK_MIME"]
