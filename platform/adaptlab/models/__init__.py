"""adaptlab.models"""
