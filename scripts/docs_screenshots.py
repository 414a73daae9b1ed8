"""Retake the console screenshots in docs/screenshots/ from a running console (`make run DEMO=1` for a few minutes,
so that every page has data), in Debian's chromium as the browser tests drive it.

    DJANGO_SUPERUSER_PASSWORD=docs-only .venv/bin/python manage.py createsuperuser --noinput \\
        --username docs --email docs@example.com
    .venv/bin/python scripts/docs_screenshots.py --user docs --password docs-only

The stalled job and the finished bulk resubmit (running-stalled.png, bulk-resubmit.png) come from the browser
tests instead (var/screenshots/ after `make test`): they need a worker killed or an operation run on purpose.
"""

import argparse
import re
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

DOCS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
# (file name, path, dark mode, full page)
SHOTS = [
    ("overview.png", "/", False, False),
    ("overview-dark.png", "/", True, False),
    ("dead-letters.png", "/dead/", False, False),
    ("running.png", "/running/", False, False),
    ("tasks.png", "/tasks/", False, False),
    ("workers.png", "/workers/", False, False),
    ("flow-control.png", "/flow/", False, False),
    ("queue.png", "/queues/default/", False, False),
    ("workflows.png", "/workflows/", False, False),
]
# On a phone (390 x 844): the folded navigation, stacked table rows, charts without plotly's toolbar.
PHONE_SHOTS = [
    ("phone-overview.png", "/", False),
    ("phone-overview-dark.png", "/", True),
    ("phone-dead-letters.png", "/dead/", False),
]


def log_in(page: Page, url: str, user: str, password: str) -> None:
    page.goto(f"{url}/admin/login/?next=/")
    page.fill("#id_username", user)
    page.fill("#id_password", password)
    with page.expect_navigation():
        page.click("input[type=submit]")


def settle(page: Page) -> None:
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(1500)  # plotly draws after the load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--out", type=Path, default=DOCS)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    url = args.url.rstrip("/")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=args.chromium, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
        )  # fmt: skip
        for scheme in ("light", "dark"):
            context = browser.new_context(viewport={"width": 1360, "height": 860}, color_scheme=scheme)
            page = context.new_page()
            log_in(page, url, args.user, args.password)
            for name, path, dark, full in SHOTS:
                if dark != (scheme == "dark"):
                    continue
                page.goto(url + path)
                settle(page)
                page.screenshot(path=str(args.out / name), full_page=full, animations="disabled")
                print(f"{name}: {path}")
            if scheme == "light":  # the newest dead job's page, whole
                page.goto(url + "/dead/")
                link = page.locator("a[href^='/jobs/']").filter(has_text=re.compile(r"^[0-9A-Z]{26}$")).first
                page.goto(url + link.get_attribute("href"))
                settle(page)
                page.screenshot(path=str(args.out / "job.png"), full_page=True, animations="disabled")
                print(f"job.png: {page.url}")
            context.close()
            phone = browser.new_context(
                viewport={"width": 390, "height": 844}, color_scheme=scheme, is_mobile=True, has_touch=True
            )
            page = phone.new_page()
            log_in(page, url, args.user, args.password)
            for name, path, dark in PHONE_SHOTS:
                if dark != (scheme == "dark"):
                    continue
                page.goto(url + path)
                settle(page)
                page.screenshot(path=str(args.out / name), full_page=False, animations="disabled")
                print(f"{name}: {path} (phone)")
            phone.close()
        browser.close()


if __name__ == "__main__":
    main()
