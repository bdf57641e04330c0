"""The OpenAPI 3.0 description of the JSON API (api.py), served at /api/openapi.json and checked
in CI by schemathesis (tests/test_api.py)."""

from __future__ import annotations

NULLABLE_RATE = {"type": "number", "nullable": True, "minimum": 0, "maximum": 1}

ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string"},
        "issues": {"type": "array", "items": {"type": "string"}},
        # An export refused with 409: the inspection in the way (running, queued, failed).
        "inspection": {"$ref": "#/components/schemas/Inspection"},
    },
}

INSPECTION = {
    "type": "object",
    "required": ["id", "taskset", "version", "status", "runs_done", "runs_total", "percent"],
    "properties": {
        "id": {"type": "integer"},
        "taskset": {"type": "string"},
        "version": {"type": "integer"},
        "status": {
            "type": "string",
            "enum": ["queued", "running", "analysing", "finished", "failed"],
        },
        # Queued, its runs still being made by a worker: runs_total is 0 until they are.
        "preparing": {"type": "boolean"},
        "phase": {
            "type": "string",
            "enum": ["preparing", "queued", "running", "analysing", "finished", "failed"],
        },
        "runs_done": {"type": "integer", "minimum": 0},
        "runs_total": {"type": "integer", "minimum": 0},
        "percent": {"type": "integer", "minimum": 0, "maximum": 100},
        "created_at": {"type": "string", "format": "date-time"},
        "finished_at": {"type": "string", "format": "date-time", "nullable": True},
        "error": {"type": "string"},
    },
}

TASK = {
    "type": "object",
    "required": ["id", "task_id", "taskset", "version", "status", "severity", "flags"],
    "properties": {
        "id": {"type": "integer"},
        "task_id": {"type": "string"},
        "taskset": {"type": "string"},
        "version": {"type": "integer"},
        "status": {"type": "string", "enum": ["active", "quarantined"]},
        "quarantine_reason": {"type": "string"},
        "severity": {"type": "integer", "minimum": 0, "maximum": 100},
        "flags": {"type": "array", "items": {"type": "string"}},
        "pending_review": {"type": "boolean"},
        "reference_pass_rate": NULLABLE_RATE,
        "sample_pass_rate": NULLABLE_RATE,
        "learnability": {"type": "number", "nullable": True},
        "assignee": {"type": "string", "nullable": True},
        # Answer-graded tasks only: the label in force, the uploaded one, corrected or not.
        "kind": {"type": "string", "enum": ["answer"]},
        "label": {"type": "string"},
        "uploaded_label": {"type": "string"},
        "relabeled": {"type": "boolean"},
        "flag_details": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "code": {"type": "string"},
                    "status": {"type": "string"},
                    "confidence": {"type": "number"},
                    "explanation": {"type": "string"},
                },
            },
        },
    },
}


def _json(schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict:
    said = {
        400: "bad input: the message says what and where",
        401: "no valid token",
        403: "the token's user lacks the role",
        404: "not found",
        409: "conflicts with the current state",
    }
    return {str(c): _json({"$ref": "#/components/schemas/Error"}, said[c]) for c in codes}


def _id(name: str, description: str) -> dict:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
    }


NAME = {
    "name": "name",
    "in": "path",
    "required": True,
    "description": "the task set's name",
    "schema": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[A-Za-z0-9._-]+$"},
}


def _query(name: str, description: str, schema: dict | None = None) -> dict:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema or {"type": "string", "maxLength": 200},
    }


INSPECTION_PIN = {
    "name": "inspection",
    "in": "query",
    "required": False,
    "description": "pin the export to this finished inspection of the task set (its verdicts, "
    "of its version); default: the latest version's last finished inspection",
    "schema": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
}

EXPORT_HEADERS = {
    "X-Inspection-Id": {
        "description": "the inspection the export comes from",
        "required": True,
        "schema": {"type": "integer"},
    },
    "X-Newer-Inspection-Id": {
        "description": "a newer inspection of the version, queued or running: the export is "
        "from the last finished one until it finishes",
        "schema": {"type": "integer"},
    },
    "X-Export-Note": {
        "description": "the newer inspection's progress, and what to do",
        "schema": {"type": "string"},
    },
}


def _export(operation_id: str, summary: str, media_type: str) -> dict:
    body = "binary" if media_type == "application/vnd.apache.parquet" else None
    schema = {"type": "string", "format": body} if body else {"type": "string"}
    return {
        "get": {
            "operationId": operation_id,
            "summary": summary,
            "description": "Refused with 409 while the version has no finished inspection to "
            "export from (one queued or running: the body names it with its progress; never "
            "inspected; or every inspection failed). While a newer inspection runs after a "
            "finished one, the export comes from the finished one and the headers say so.",
            "parameters": [NAME, INSPECTION_PIN],
            "responses": {
                "200": {
                    "description": "the file, as an attachment named after the set, version "
                    "and inspection",
                    "headers": EXPORT_HEADERS,
                    "content": {media_type: {"schema": schema}},
                },
                "400": _json(
                    {"$ref": "#/components/schemas/Error"}, "`inspection` is not a whole number"
                ),
                **_errors(401, 403),
                "404": _json(
                    {"$ref": "#/components/schemas/Error"},
                    "no such task set, or no such inspection of it",
                ),
                "409": _json(
                    {"$ref": "#/components/schemas/Error"},
                    "nothing finished to export from, or the pinned inspection is not finished: "
                    "`inspection` is the inspection in the way, with its progress",
                ),
            },
        }
    }


def document(server: str = "") -> dict:
    reason_body = {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["reason"],
                    "properties": {"reason": {"type": "string", "minLength": 1, "pattern": "\\S"}},
                }
            }
        },
    }
    relabel_body = {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["label", "reason"],
                    "properties": {
                        "label": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 10000,
                            "pattern": "\\S",
                            "description": "the new label; the uploaded label again undoes "
                            "the correction",
                        },
                        "reason": {"type": "string", "minLength": 1, "pattern": "\\S"},
                    },
                }
            }
        },
    }
    note_body = {
        "content": {
            "application/json": {
                "schema": {"type": "object", "properties": {"note": {"type": "string"}}}
            }
        }
    }
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Environment inspection API",
            "version": "1",
            "description": "Upload task sets, inspect them, triage their tasks and pull the "
            "clean manifest and the report. Authenticate with `Authorization: Bearer <token>`; tokens are "
            "made and revoked on the Tokens page and act with their user's roles.",
        },
        "servers": [{"url": server}] if server else [],
        "components": {
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": ERROR, "Inspection": INSPECTION, "Task": TASK},
        },
        "security": [{"token": []}],
        "paths": {
            "/api/v1/tasksets": {
                "get": {
                    "operationId": "listTasksets",
                    "summary": "Task sets and their latest versions (reviewer)",
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["results"],
                                "properties": {
                                    "results": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["name"],
                                            "properties": {
                                                "name": {"type": "string"},
                                                "latest_version": {
                                                    "type": "integer",
                                                    "nullable": True,
                                                },
                                                "task_count": {"type": "integer"},
                                                "created_at": {"type": "string"},
                                            },
                                        },
                                    }
                                },
                            },
                            "the task sets",
                        ),
                        **_errors(401, 403),
                    },
                },
                "post": {
                    "operationId": "uploadTaskset",
                    "summary": "Upload a task set, or a new version of one (admin); stored whole "
                    "or not at all",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "multipart/form-data": {
                                "schema": {
                                    "type": "object",
                                    "required": ["name", "tasks_file"],
                                    "properties": {
                                        "name": {"type": "string"},
                                        "tasks_file": {"type": "string", "format": "binary"},
                                        "samples_file": {"type": "string", "format": "binary"},
                                        "environments_file": {
                                            "type": "string",
                                            "format": "binary",
                                            "description": "SWE-bench instances: their "
                                            "environment folders (.tar.gz or .zip)",
                                        },
                                        "terminal_mode": {
                                            "type": "string",
                                            "enum": ["faithful", "isolated"],
                                        },
                                        "answer_rule": {
                                            "type": "string",
                                            "enum": [
                                                "auto",
                                                "boxed",
                                                "gsm8k",
                                                "answer_is",
                                                "last_number",
                                                "lenient",
                                                "contains",
                                                "given",
                                            ],
                                        },
                                    },
                                }
                            }
                        },
                    },
                    "responses": {
                        "201": _json(
                            {
                                "type": "object",
                                "required": ["taskset", "version", "task_count"],
                                "properties": {
                                    "taskset": {"type": "string"},
                                    "version": {"type": "integer"},
                                    "task_count": {"type": "integer"},
                                    "sample_count": {"type": "integer"},
                                },
                            },
                            "stored as a new version",
                        ),
                        **_errors(400, 401, 403),
                    },
                },
            },
            "/api/v1/tasksets/{name}/inspections": {
                "post": {
                    "operationId": "startInspection",
                    "summary": "Inspect the set's latest version (admin)",
                    "parameters": [NAME],
                    "responses": {
                        "202": _json({"$ref": "#/components/schemas/Inspection"}, "started"),
                        **_errors(401, 403, 404, 409),
                    },
                }
            },
            "/api/v1/tasksets/{name}/manifest.jsonl": _export(
                "downloadManifest",
                "The clean tasks of the latest version by its last finished inspection, one "
                "JSON object a line (the task's line as uploaded plus `quality`), streamed (admin)",
                "application/jsonl",
            ),
            "/api/v1/tasksets/{name}/report.jsonl": _export(
                "downloadReportJsonl",
                "Every task of the latest version with its flags, their status, explanations "
                "and evidence, and its figures, one JSON object a line (admin)",
                "application/jsonl",
            ),
            "/api/v1/tasksets/{name}/report.csv": _export(
                "downloadReportCsv",
                "The report table of the latest version's tasks as CSV, streamed (admin)",
                "text/csv",
            ),
            "/api/v1/tasksets/{name}/report.parquet": _export(
                "downloadReportParquet",
                "The report table of the latest version's tasks as Parquet (admin)",
                "application/vnd.apache.parquet",
            ),
            "/api/v1/inspections/{id}": {
                "get": {
                    "operationId": "getInspection",
                    "summary": "An inspection's status and progress (reviewer)",
                    "parameters": [_id("id", "the inspection's id")],
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/Inspection"}, "it"),
                        **_errors(401, 403, 404),
                    },
                }
            },
            "/api/v1/tasks": {
                "get": {
                    "operationId": "listTasks",
                    "summary": "Tasks with their flags and status, filtered and paged (reviewer)",
                    "parameters": [
                        _query("taskset", "a task set's name"),
                        _query("version", "a version number of `taskset`"),
                        _query("flag", "a flag code the task carries"),
                        _query("status", "active or quarantined"),
                        _query("review", "pending, reviewed or unflagged"),
                        _query("severity", "lowest combined severity"),
                        _query("domain", "the task's domain"),
                        _query("assignee", "a username, me or none"),
                        _query("q", "text in the task id or prompt"),
                        _query("sort", "severity, -severity, task, -task, samples, -samples"),
                        _query("all", "1: unflagged tasks too", {"type": "string", "enum": ["1"]}),
                        _query(
                            "page", "from 1", {"type": "integer", "minimum": 1, "maximum": 1000}
                        ),
                        _query(
                            "page_size",
                            "1 to 500, default 100",
                            {"type": "integer", "minimum": 1, "maximum": 500},
                        ),
                    ],
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["count", "page", "pages", "results"],
                                "properties": {
                                    "count": {"type": "integer"},
                                    "page": {"type": "integer"},
                                    "pages": {"type": "integer"},
                                    "results": {
                                        "type": "array",
                                        "items": {"$ref": "#/components/schemas/Task"},
                                    },
                                },
                            },
                            "a page of tasks, most severe first unless sorted otherwise",
                        ),
                        **_errors(400, 401, 403, 404),
                    },
                }
            },
            "/api/v1/tasks/{id}": {
                "get": {
                    "operationId": "getTask",
                    "summary": "One task with its flags' explanations (reviewer)",
                    "parameters": [_id("id", "the task's id")],
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/Task"}, "it"),
                        **_errors(401, 403, 404),
                    },
                }
            },
            "/api/v1/tasks/{id}/quarantine": {
                "post": {
                    "operationId": "quarantineTask",
                    "summary": "Quarantine a task with a reason (reviewer); audited",
                    "parameters": [_id("id", "the task's id")],
                    "requestBody": reason_body,
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/Task"}, "quarantined"),
                        **_errors(400, 401, 403, 404, 409),
                    },
                }
            },
            "/api/v1/tasks/{id}/relabel": {
                "post": {
                    "operationId": "relabelTask",
                    "summary": "Put a new label on an answer-graded task, with a reason "
                    "(reviewer); audited, and the manifest carries it (409: not an answer "
                    "task, or another reviewer is reviewing it)",
                    "parameters": [_id("id", "the task's id")],
                    "requestBody": relabel_body,
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/Task"}, "relabeled"),
                        **_errors(400, 401, 403, 404, 409),
                    },
                }
            },
            "/api/v1/tasks/{id}/release": {
                "post": {
                    "operationId": "releaseTask",
                    "summary": "Release a quarantined task, with an optional note (reviewer); "
                    "audited",
                    "parameters": [_id("id", "the task's id")],
                    "requestBody": note_body,
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/Task"}, "released"),
                        **_errors(401, 403, 404, 409),
                    },
                }
            },
        },
    }
