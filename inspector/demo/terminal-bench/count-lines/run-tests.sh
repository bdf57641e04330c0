#!/bin/bash
set -e
cd "${TEST_DIR:-/tests}"
/usr/bin/python3 -m pytest -q -p no:cacheprovider test_outputs.py
