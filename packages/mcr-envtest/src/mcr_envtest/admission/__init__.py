"""Admission and conversion webhooks, called as kube-apiserver calls them.

:mod:`.dispatch` runs the mutating and validating webhooks of the stored
Validating/MutatingWebhookConfigurations for a write; :mod:`.conversion` converts custom
resources through a CRD's conversion webhook; :mod:`.call` posts the reviews over HTTPS;
:mod:`.match` decides which webhooks a request concerns.
"""
