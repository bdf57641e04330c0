#!/bin/bash
[ "$(bash /app/greet.sh ada)" = "hi ada" ]
