"""Exercises that check a student's code: I/O cases judged on the host, teacher tests run in an
instance of their own that calls the student's code across the host (plain data and handles
only). See docs/exercises.md."""

from .checker import CHECK_MIME, RunSpec, check_code, find_record, harness_program, judge, plan, run_check
from .judging import compare_output, redact, summarize
from .model import Exercise, ExerciseError, IOCase, TestFile, load_exercise, load_folder

__all__ = ["Exercise", "ExerciseError", "IOCase", "TestFile", "load_exercise", "load_folder",
           "RunSpec", "plan", "judge", "run_check", "summarize", "redact", "check_code", "harness_program",
           "compare_output", "find_record", "CHECK_MIME"]
