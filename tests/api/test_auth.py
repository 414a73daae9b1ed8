"""API tokens: issued once in plain text and stored hashed; bearer authentication, scopes, revocation, anonymous
seed routes only when the setting allows them; the apitoken command and the admin's add form."""

import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.test import Client, RequestFactory

from jobconsole_api.auth import request_token, token_required
from jobconsole_api.models import ApiToken, hash_token
from jobconsole_api.problems import api_view

pytestmark = pytest.mark.django_db
factory = RequestFactory()


@api_view(methods=["GET"])
@token_required("operate")
def operate_view(request: HttpRequest) -> HttpResponse:
    token = request_token(request)
    return JsonResponse({"token": token.name if token else None})


@api_view(methods=["GET"])
@token_required("submit")
def submit_view(request: HttpRequest) -> HttpResponse:
    token = request_token(request)
    return JsonResponse({"token": token.name if token else None})


@api_view(methods=["GET"])
@token_required("submit", seed=True)
def seed_view(request: HttpRequest) -> HttpResponse:
    token = request_token(request)
    return JsonResponse({"token": token.name if token else None})


def call(view: Any, token: str | None = None, header: str | None = None) -> HttpResponse:
    headers = {"Authorization": header if header is not None else f"Bearer {token}"} if token or header else {}
    response: HttpResponse = view(factory.get("/x", headers=headers))
    return response


def test_the_token_is_stored_hashed_and_found_by_its_hash() -> None:
    token, plain = ApiToken.objects.issue("billing", "submit")
    assert plain.startswith("jc_") and len(plain) > 40 and plain.startswith(token.prefix)
    assert token.secret_hash == hash_token(plain) and plain not in token.secret_hash
    assert json.loads(call(submit_view, plain).content) == {"token": "billing"}
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_no_token_is_401_with_a_challenge() -> None:
    response = call(submit_view)
    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
    assert "Authorization: Bearer" in json.loads(response.content)["detail"]


@pytest.mark.parametrize("header", ["Bearer jc_nottherealone", "Basic dXNlcjpwYXNz", "Bearer", "Bearer  "])
def test_a_wrong_token_or_scheme_is_401(header: str) -> None:
    ApiToken.objects.issue("billing", "operate")
    response = call(submit_view, header=header)
    assert response.status_code == 401 and "error=" in response["WWW-Authenticate"]


def test_a_revoked_token_is_401() -> None:
    token, plain = ApiToken.objects.issue("old", "operate")
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=token.created_at)
    response = call(submit_view, plain)
    assert response.status_code == 401 and "revoked" in json.loads(response.content)["detail"]


def test_submit_scope_is_403_on_operate_routes_and_operate_includes_submit() -> None:
    _, submit = ApiToken.objects.issue("producer", "submit")
    _, operate = ApiToken.objects.issue("ops", "operate")
    refused = call(operate_view, submit)
    assert refused.status_code == 403 and "insufficient_scope" in refused["WWW-Authenticate"]
    assert "'operate'" in json.loads(refused.content)["detail"]
    assert call(operate_view, operate).status_code == 200
    assert call(submit_view, operate).status_code == 200


def test_seed_routes_need_a_token_unless_anonymous_seeds_is_on(settings: Any) -> None:
    assert call(seed_view).status_code == 401
    settings.JOBCONSOLE = {**settings.JOBCONSOLE, "API": {"ANONYMOUS_SEEDS": True}}
    response = call(seed_view)
    assert response.status_code == 200 and json.loads(response.content) == {"token": None}
    assert call(submit_view).status_code == 401  # native routes never let anonymous callers in
    assert call(seed_view, "jc_wrong").status_code == 401  # a token that is sent is still checked


def test_anonymous_seeds_reads_its_environment_variable(monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    monkeypatch.setenv("JOBCONSOLE_API_ANONYMOUS_SEEDS", "1")
    settings.JOBCONSOLE = {**settings.JOBCONSOLE}  # read the settings again
    assert call(seed_view).status_code == 200


def test_unknown_scopes_are_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown scope"):
        token_required("admin")
    with pytest.raises(ValueError, match="scope must be"):
        ApiToken.objects.issue("x", "admin")


def test_the_command_prints_the_token_once_and_revokes_it() -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command("apitoken", "create", "--name", "ci", "--scope", "operate", stdout=out, stderr=err)
    plain = out.getvalue().strip()
    token = ApiToken.objects.get()
    assert token.scope == "operate" and token.secret_hash == hash_token(plain) and "shown only" in err.getvalue()
    assert call(operate_view, plain).status_code == 200
    listing = io.StringIO()
    call_command("apitoken", "list", stdout=listing)
    assert token.prefix in listing.getvalue() and plain not in listing.getvalue()
    call_command("apitoken", "revoke", token.prefix, stdout=io.StringIO())
    assert call(operate_view, plain).status_code == 401


def test_the_admin_add_form_shows_the_token_once() -> None:
    admin = User.objects.create_superuser("root", "root@example.com", "pw-for-tests")
    browser = Client()
    browser.force_login(admin)
    response = browser.post(
        "/admin/jobconsole_api/apitoken/add/", {"name": "from admin", "scope": "submit"}, follow=True
    )
    assert response.status_code == 200
    token = ApiToken.objects.get()
    shown = next(str(m) for m in response.context["messages"] if "shown only" in str(m))
    plain = shown.rsplit(" ", 1)[1]
    assert token.created_by == admin and token.secret_hash == hash_token(plain)
    assert call(submit_view, plain).status_code == 200
