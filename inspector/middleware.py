"""Django's LoginRequiredMiddleware, but a program is never sent to the login page: a request
that carries an Authorization header, or asks for a path under /api/, gets a 401 in JSON naming
the API operation to use instead."""

from __future__ import annotations

from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequired
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve


def api_equivalent(path: str) -> str:
    """The API path that serves what a browser path does (/tasksets/x/report.csv ->
    /api/v1/tasksets/x/report.csv), or "" when the API has none."""
    candidate = "/api/v1" + path
    try:
        match = resolve(candidate)
    except Resolver404:
        return ""
    return "" if match.url_name == "api-not-found" else candidate


class LoginRequiredMiddleware(DjangoLoginRequired):
    def handle_no_permission(self, request: HttpRequest, view_func) -> HttpResponse:
        if "Authorization" not in request.headers and not request.path.startswith("/api/"):
            return super().handle_no_permission(request, view_func)
        message = (
            f"{request.path} is a browser page: it takes a signed-in session, not an API token."
        )
        instead = api_equivalent(request.path)
        if instead:
            query = request.META.get("QUERY_STRING", "")
            message += f" With a token, use {instead}{'?' + query if query else ''}."
        message += " The API's operations are listed at /api/openapi.json."
        response = JsonResponse({"error": message}, status=401)
        response["WWW-Authenticate"] = "Bearer"
        return response
