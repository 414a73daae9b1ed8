from django.urls import path

from dashboards import views

app_name = "dashboards"
urlpatterns = [
    path("", views.overview, name="overview"),
    path("healthz", views.healthz, name="healthz"),
]
