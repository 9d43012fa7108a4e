"""adaptlab.runtime"""
