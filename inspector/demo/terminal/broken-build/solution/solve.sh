#!/bin/bash
jq --version > /app/jq-version.txt
