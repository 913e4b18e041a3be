"""Streamlit pages, each run by path through ``st.navigation`` (see ``frontend/app.py``)."""
