FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN apt-get update && apt-get install -y --no-install-recommends gettext && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY compression compression
COPY console console
RUN pip install --no-cache-dir ./compression .
COPY . .
RUN DEBUG=false SECRET_KEY=build-only python manage.py collectstatic --no-input \
 && DEBUG=false SECRET_KEY=build-only python manage.py compilemessages -l zh_Hans --ignore=.venv
RUN useradd --create-home console && chown -R console /app
USER console
EXPOSE 8000
CMD ["gunicorn", "console.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "8", "--timeout", "120"]
