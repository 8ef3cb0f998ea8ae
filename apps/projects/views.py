"""The invitation page: a logged-in user opens an owner's link and accepts it (PROTOCOL §5)."""

from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from apps.core.errors import ServiceError
from apps.projects import selectors, services
from apps.projects.selectors import principal_from_user


@require_http_methods(["GET", "POST"])
def invitation_page(request: HttpRequest, token: str) -> HttpResponse:
    """GET asks the logged-in user to accept; POST accepts and opens the chat. Logged out: log in first."""
    principal = principal_from_user(request.user)
    if principal is None:
        return redirect_to_login(request.get_full_path())
    try:
        if request.method == "POST":
            services.invitation_accept(principal=principal, token=token)
            return redirect("chat:new")
        preview = selectors.invitation_preview(principal=principal, token=token)
    except ServiceError as exc:
        return render(
            request,
            "projects/invitation.html",
            {"error": exc.message, "code": exc.code},
            status=exc.status,
        )
    return render(request, "projects/invitation.html", {"preview": preview, "invitation": preview.invitation})
