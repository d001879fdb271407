import pytest


@pytest.mark.django_db
def test_it_reports_database_and_broker_without_login(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"]["ok"] is True
    assert body["broker"]["ok"] is True


@pytest.mark.django_db
def test_it_answers_503_when_the_broker_is_unreachable(client):
    from console.celery import app

    saved = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    try:
        response = client.get("/healthz")
    finally:
        app.conf.broker_url = saved
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["broker"]["ok"] is False
    assert body["database"]["ok"] is True
